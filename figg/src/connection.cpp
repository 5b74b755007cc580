// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <asio/post.hpp>

#include "polybus/adapter/budget.hpp"
#include "polybus/error.hpp"

namespace polybus::figg {

Connection::Connection(const AdapterContext& context, HostPort endpoint)
    : ctx_(context),
      endpoint_(std::move(endpoint)),
      settings_(TransportSettings::from_options(context.options())),
      machine_(static_cast<std::size_t>(context.options().get_int("window")),
               static_cast<std::size_t>(context.options().get_int("max_frame_size")), *this),
      reconnect_(context, endpoint_.to_string()),
      ping_interval_(context.options().get_duration("ping_interval")),
      ping_timer_(context.strand()) {
  settings_.protocol = "Figg";
}

Connection::~Connection() {
  if (transport_) transport_->close();  // pending reads hold the transport until it closes
}

void Connection::start() {
  asio::post(ctx_.strand(), [self = shared_from_this()] { self->connect(); });
}

void Connection::publish(PublishWork&& work) {
  if (closed_) return work.done(make_error_code(polybus::errc::closed));
  if (work.topic.empty() || work.topic.size() > kMaxTopicLength)
    return work.done(make_error_code(errc::invalid_topic), {}, "figg: topic must be 1-1024 bytes");
  // The PUBLISH frame: 8 bytes of header, the topic with its length, the sequence number.
  if (auto text = frame_over_write_room(ctx_.budget(),
                                        work.topic.size() + work.payloads.front().size() + 32);
      !text.empty())
    return work.done(make_error_code(polybus::errc::limit_exceeded), {}, text);
  if (machine_.window_full() || !waiting_.empty())
    waiting_.push_back(std::move(work));  // released by ACKs, or failed by the deadline
  else
    send_to_window(work);
  count_waiting();
}

void Connection::count_waiting() {
  ctx_.waiting_publishes(waiting_.size() + machine_.unwritten());
}

void Connection::send_to_window(PublishWork& work) {
  if (work.done.done()) return;  // its deadline passed while it waited
  in_window_.push_back(std::move(work.done));
  machine_.publish(std::move(work.topic), std::move(work.payloads.front()));
}

void Connection::release_waiting() {
  while (!waiting_.empty() && !machine_.window_full()) {
    // Sent from its place in the queue, popped after: send_to_window() moves what it keeps out
    // first and touches the work no more, so a publish queued meanwhile changes nothing.
    send_to_window(waiting_.front());
    waiting_.pop_front();
  }
  count_waiting();
}

std::error_code Connection::attach(const std::string& topic, std::optional<std::uint64_t> from,
                                   std::shared_ptr<SubscriptionSink> sink) {
  if (auto ec = machine_.attach(topic, from)) return ec;
  sinks_[topic] = {std::move(sink), std::make_shared<const std::string>(topic)};
  return {};
}

void Connection::detach(const std::string& topic) {
  machine_.detach(topic);
  last_sink_ = sinks_.end();
  sinks_.erase(topic);
}

void Connection::pause(const std::string& topic) {
  auto it = sinks_.find(topic);
  if (it == sinks_.end() || it->second.paused) return;
  it->second.paused = true;
  it->second.resume_from = machine_.offset(topic);
  machine_.detach(topic);
}

void Connection::resume(const std::string& topic) {
  auto it = sinks_.find(topic);
  if (it == sinks_.end() || !it->second.paused) return;
  it->second.paused = false;
  machine_.attach(topic, it->second.resume_from);
}

// TCP paces the server while reading stops (a DETACH/ATTACH per cycle would churn). PONGs are
// not read meanwhile, so liveness waits too.
void Connection::hold(bool on) {
  holds_ += on ? 1 : -1;
  if (!transport_) return;
  if (holds_ > 0)
    transport_->pause_reading();
  else
    transport_->resume_reading();
}

void Connection::ping(OpCompletion done) {
  // Sent now, or on connecting; an older server never answers PING: the deadline settles it.
  while (!pings_.empty() && pings_.front().second.done()) pings_.pop_front();
  pings_.push_back({++ping_counter_, std::move(done)});
  machine_.ping(ping_counter_);
}

void Connection::close(std::function<void()> done) {
  closed_ = true;
  reconnect_.cancel();
  ping_timer_.cancel();
  for (auto& [topic, sink] : sinks_) machine_.detach(topic);
  if (transport_) transport_->close_after_flush();  // the DETACHes go out first
  machine_.abandon();
  const auto closed = make_error_code(polybus::errc::closed);
  for (auto& publish : in_window_) publish(closed, {}, "client closed");
  in_window_.clear();
  for (auto& work : waiting_) work.done(closed, {}, "client closed");
  waiting_.clear();
  count_waiting();
  last_sink_ = sinks_.end();
  sinks_.clear();
  ctx_.state(ConnectionState::closed, endpoint_.to_string());
  done();
}

// ---- MachineHandler ----

void Connection::send(std::string bytes) {
  if (transport_) transport_->write(std::move(bytes));
}

void Connection::send(std::shared_ptr<const std::string> payload) {
  if (transport_) transport_->write(std::move(payload));
}

void Connection::send_copy(std::string_view bytes) {
  if (transport_) transport_->write_copy(bytes);
}

void Connection::on_acked(std::size_t count) {
  for (; count > 0 && !in_window_.empty(); --count) {
    OpCompletion done = std::move(in_window_.front());
    in_window_.pop_front();
    done({});
  }
}

void Connection::on_data(const std::string& topic, std::uint64_t offset, std::string_view data,
                         const std::shared_ptr<const void>& owner) {
  // Runs of DATA are for one topic: the last one's sink is looked at first.
  auto it =
      last_sink_ != sinks_.end() && last_sink_->first == topic ? last_sink_ : sinks_.find(topic);
  last_sink_ = it;
  if (it == sinks_.end() || it->second.paused) return;
  auto state = ctx_.make_message({});
  state->shared_topic = it->second.topic;
  state->buffer = owner;
  state->payload = data;
  state->offset = offset;
  state->id.assign_number(offset);
  it->second.sink->deliver(Message(std::move(state)));
}

void Connection::on_attached(const std::string& topic, std::uint64_t) {
  auto it = sinks_.find(topic);
  if (it != sinks_.end() && !it->second.confirmed) {
    it->second.confirmed = true;
    it->second.sink->ready({});
  }
}

void Connection::on_pong(std::uint64_t timestamp) {
  server_pongs_ = true;
  missed_pongs_ = 0;
  while (!pings_.empty() && pings_.front().first <= timestamp) {
    pings_.front().second({});
    pings_.pop_front();
  }
}

void Connection::on_log_reset(const std::string& topic, std::uint64_t resume_from,
                              std::uint64_t log_end) {
  // Not a failure of this connection: said, so that what the restart lost is not lost silently.
  ctx_.error(make_error_code(polybus::errc::broker_error),
             endpoint_.to_string() + ": topic '" + topic + "' now ends at offset " +
                 std::to_string(log_end) + ", before this subscription's offset " +
                 std::to_string(resume_from) +
                 ": the Figg server restarted and kept nothing; resuming from its start (messages "
                 "published before the restart and not yet delivered are lost)");
}

void Connection::on_failure(std::error_code ec, const std::string& detail) {
  if (transport_) transport_->fail(ec, endpoint_.to_string() + ": " + detail);
}

// ---- the connection's life ----

void Connection::connect() {
  if (closed_) return;
  Transport::Callbacks callbacks;
  std::weak_ptr<Connection> weak = shared_from_this();
  callbacks.on_connected = [weak] {
    if (auto self = weak.lock()) self->on_connected();
  };
  callbacks.on_data = [weak](const std::shared_ptr<ReadChunk>& chunk, const char* data,
                             std::size_t n) {
    auto self = weak.lock();
    if (!self) return;
    const std::uint64_t frames = self->machine_.frames();
    self->machine_.receive(chunk, std::string_view(data, n));
    self->release_waiting();
    const bool completed = self->machine_.frames() != frames;
    if (completed) self->reconnect_.proven();
    if (self->transport_) self->transport_->frame_state(self->machine_.partial_frame(), completed);
  };
  callbacks.on_closed = [weak](std::error_code ec, const std::string& detail) {
    if (auto self = weak.lock()) self->on_closed(ec, detail);
  };
  callbacks.on_write_room = [weak] {
    if (auto self = weak.lock()) {
      self->machine_.send_unsent();
      self->count_waiting();
    }
  };
  transport_ = Transport::create(ctx_.strand(), settings_, std::move(callbacks), &ctx_);
  reconnect_.attempting();
  transport_->connect(endpoint_);
  if (holds_ > 0) transport_->pause_reading();
}

void Connection::on_connected() {
  reconnect_.connected();
  server_pongs_ = false;
  missed_pongs_ = 0;
  machine_.connected();
  count_waiting();
  for (auto& ping : pings_) machine_.ping(ping.first);
  arm_ping();
}

void Connection::on_closed(std::error_code ec, const std::string& detail) {
  machine_.disconnected();
  count_waiting();
  ping_timer_.cancel();
  if (closed_) return;
  reconnect_.lost(ec, detail, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->connect();
  });
}

// Liveness: PING every ping_interval. Only a server that has answered a PING is held to it (two
// unanswered in a row drop the connection); the older server never answers and is left alone
// rather than disconnected for it.
void Connection::arm_ping() {
  if (ping_interval_.count() <= 0) return;
  ping_timer_.expires_after(ping_interval_);
  ping_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->machine_.is_connected()) return;
    if (self->holds_ > 0) self->missed_pongs_ = 0;  // not reading: no PONG can arrive
    if (self->server_pongs_ && ++self->missed_pongs_ > 2) {
      self->on_failure(make_error_code(polybus::errc::timeout),
                       "two PINGs unanswered (ping_interval " +
                           std::to_string(self->ping_interval_.count()) +
                           "ms): connection presumed dead");
      return;
    }
    self->machine_.ping(++self->ping_counter_);
    self->arm_ping();
  });
}

}  // namespace polybus::figg
