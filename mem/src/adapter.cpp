// SPDX-License-Identifier: Apache-2.0
// The mem:// adapter: a client session on an in-process broker, with the same connection
// life cycle as a network adapter (connect, drop on broker restart, reconnect with backoff,
// resubscribe, resend what was queued while disconnected).
#include "polybus/mem.hpp"

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <deque>
#include <random>

#include "broker.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/io/reconnect.hpp"

namespace polybus::mem {
namespace {

Capabilities mem_capabilities() {
  Capabilities c;
  c.publish = c.subscribe = c.publish_confirmed = c.reconnect_policy = true;
  c.reply_errors = true;  // a serve handler's failure reaches the requester
  c.ack = c.nack_with_delay = c.touch = c.redelivery_on_timeout = true;
  c.replay_from_offset = c.request_reply = c.ordered_delivery = c.consumer_groups = true;
  c.batch_publish = c.deferred_publish = true;
  c.durable = false;  // kept across restart(), not across the process
  return c;
}

std::uint64_t random_id() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return engine();
}

class MemSession : public MessageBackend, public std::enable_shared_from_this<MemSession> {
 public:
  MemSession(AdapterContext& context, std::shared_ptr<BrokerImpl> broker)
      : ctx_(context),
        broker_(std::move(broker)),
        endpoint_("mem://" +
                  (context.url().hosts.empty() ? std::string() : context.url().hosts[0].host)),
        msg_timeout_(context.options().get_duration("msg_timeout")),
        reconnect_(context, endpoint_),
        client_id_(random_id()) {}

  void start() {
    asio::post(ctx_.strand(), [self = shared_from_this()] { self->connect(); });
  }

  void publish(PublishWork work) {
    if (session_ == 0) {
      waiting_publish_messages_ += work.payloads.size();
      waiting_publishes_.push_back(std::move(work));
      return count_waiting();
    }
    send_publish(work);
  }

  // The publishes (in messages) and requests held for a session, for the metrics.
  void count_waiting() {
    ctx_.waiting_publishes(closed_ ? 0 : waiting_publish_messages_);
    ctx_.waiting_requests(closed_ ? 0 : waiting_requests_.size());
  }

  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink,
                                                 bool serve);

  void request(RequestWork work) {
    if (session_ == 0) {
      waiting_requests_.push_back(std::move(work));
      return count_waiting();
    }
    send_request(std::move(work));
  }

  void ping(OpCompletion done) {
    done(session_ != 0 && broker_->alive(session_) ? std::error_code{}
                                                   : make_error_code(errc::disconnected));
  }

  void close(std::function<void()> done) {
    closed_ = true;
    count_waiting();
    reconnect_.cancel();
    if (session_ != 0) {
      for (auto& [id, sub] : subs_) broker_->unsubscribe(session_, id, sub.anonymous);
      broker_->disconnect(session_);
      session_ = 0;
    }
    subs_.clear();
    fail_open_requests(make_error_code(errc::closed), "client closed");
    ctx_.state(ConnectionState::closed, endpoint_);
    done();
  }

  // Subscription controls (strand).
  void unsubscribe(std::uint64_t id, OpCompletion done) {
    auto it = subs_.find(id);
    if (it != subs_.end()) {
      if (session_ != 0) broker_->unsubscribe(session_, id, it->second.anonymous);
      subs_.erase(it);
    }
    done({});
  }
  void set_flow(std::uint64_t id, std::optional<bool> paused, std::optional<std::uint32_t> max) {
    auto it = subs_.find(id);
    if (it == subs_.end()) return;
    if (paused) it->second.paused = *paused;
    if (max) it->second.spec.max_in_flight = *max;
    if (session_ != 0) broker_->set_max_in_flight(session_, id, it->second.credit());
  }

  // MessageBackend (strand).
  void ack(detail::MessageState& m) override {
    respond(m, "ack", [&] { return broker_->ack(session_, m.adapter_token); });
  }
  void nack(detail::MessageState& m, std::chrono::milliseconds delay) override {
    respond(m, "nack", [&] { return broker_->nack(session_, m.adapter_token, delay); });
  }
  void touch(detail::MessageState& m) override {
    respond(m, "touch", [&] { return broker_->touch(session_, m.adapter_token); });
  }
  void reply(detail::MessageState& m, std::string payload, std::error_code ec,
             std::string detail) override {
    respond(m, "reply", [&] {
      return broker_->reply(session_, m.adapter_token, std::move(payload), ec, std::move(detail));
    });
  }

 private:
  struct SubRecord {
    SubscribeSpec spec;
    std::shared_ptr<SubscriptionSink> sink;
    std::string group;
    bool anonymous;
    bool serve;
    bool paused = false;
    bool confirmed = false;
    std::uint32_t credit() const { return paused ? 0 : spec.max_in_flight; }
  };

  template <typename Fn>
  void respond(detail::MessageState& m, const char* what, Fn fn) {
    std::error_code ec = session_ == 0 ? make_error_code(errc::disconnected) : fn();
    if (ec)
      ctx_.error(ec, endpoint_ + ": " + what + " of message " + m.id.text() + " on '" +
                         m.topic_name() +
                         "' failed: it was given back to the broker (timed out or disconnected) "
                         "and will be redelivered");
  }

  void connect() {
    if (closed_) return;
    reconnect_.attempting();
    std::weak_ptr<MemSession> weak = shared_from_this();
    const std::uint64_t generation = ++generation_;
    auto strand = ctx_.strand();
    SessionCallbacks callbacks;
    callbacks.deliver = [weak, strand, generation](Delivery d) {
      asio::post(strand, [weak, generation, d = std::move(d)]() mutable {
        if (auto self = weak.lock()) self->on_delivery(generation, std::move(d));
      });
    };
    callbacks.reply = [weak, strand](std::uint64_t id, std::error_code ec, std::string payload,
                                     std::string detail) {
      asio::post(strand, [weak, id, ec, payload = std::move(payload),
                          detail = std::move(detail)]() mutable {
        if (auto self = weak.lock()) self->on_reply(id, ec, std::move(payload), std::move(detail));
      });
    };
    callbacks.disconnected = [weak, strand, generation] {
      asio::post(strand, [weak, generation] {
        if (auto self = weak.lock()) self->on_disconnected(generation);
      });
    };
    session_ = broker_->connect(std::move(callbacks), msg_timeout_);
    if (session_ == 0) {
      const std::string detail = "no in-process broker " + endpoint_ + " is running";
      schedule_reconnect(make_error_code(errc::connect_failed), detail);
      return;
    }
    reconnect_.connected();
    reconnect_.proven();  // an in-process broker that let the session in works
    for (auto& [id, sub] : subs_) establish(id, sub);
    auto publishes = std::move(waiting_publishes_);
    waiting_publishes_.clear();
    waiting_publish_messages_ = 0;
    for (auto& work : publishes)
      if (!work.done.done()) send_publish(work);
    auto requests = std::move(waiting_requests_);
    waiting_requests_.clear();
    count_waiting();
    for (auto& work : requests)
      if (!work.done.done()) send_request(std::move(work));
  }

  void schedule_reconnect(std::error_code why, const std::string& detail) {
    if (closed_) return;
    // The same reconnect loop as the network adapters.
    reconnect_.lost(why, detail, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->connect();
    });
  }

  void on_disconnected(std::uint64_t generation) {
    if (generation != generation_ || session_ == 0) return;
    session_ = 0;
    const std::string detail = "the in-process broker " + endpoint_ + " went away";
    const auto why = make_error_code(errc::disconnected);
    reconnect_.ended(why, detail);
    fail_open_requests(why, "disconnected before the reply came");
    if (closed_) return;
    reconnect_.retry(why, detail, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->connect();
    });
  }

  void establish(std::uint64_t id, SubRecord& sub) {
    std::error_code ec;
    if (sub.serve) {
      ec = broker_->serve(session_, id, sub.spec.topic, sub.credit());
    } else {
      // The start offset applies when the group is created; afterwards the group's own
      // position (kept by the broker across reconnects) is where delivery resumes.
      ec = broker_->subscribe(session_, id, sub.spec.topic, sub.group,
                              sub.confirmed ? std::nullopt : sub.spec.from_offset, sub.credit());
    }
    // The session went (a broker stopped or restarting) before its notice reached the strand:
    // not a refusal. The record stays, and the reconnect sets it up and confirms it.
    if (ec == make_error_code(errc::disconnected)) return;
    if (!sub.confirmed) {
      sub.confirmed = !ec;
      sub.sink->ready(ec, ec ? ec.message() : std::string());
    }
  }

  void send_publish(PublishWork& work) {
    std::size_t bytes = 0;
    for (auto& p : work.payloads) bytes += p.size();
    auto ec = broker_->publish(session_, work.topic, work.payloads, work.defer);
    if (ec == errc::disconnected) {
      // The broker dropped us and the notice is on its way: send it again after reconnecting.
      waiting_publish_messages_ += work.payloads.size();
      waiting_publishes_.push_back(std::move(work));
      return count_waiting();
    }
    if (!ec) ctx_.count_bytes_out(bytes);
    work.done(ec);
  }

  void send_request(RequestWork work) {
    std::uint64_t id = ++next_request_;
    ctx_.count_bytes_out(work.payload.size());
    auto ec = broker_->request(session_, id, work.topic, work.payload);
    if (ec == errc::disconnected) {
      waiting_requests_.push_back(std::move(work));
      return count_waiting();
    }
    if (ec) {
      work.done(ec, {},
                ec == make_error_code(errc::no_responder) ? "nobody serves '" + work.topic + "'"
                                                          : ec.message());
      return;
    }
    open_requests_.emplace(id, std::move(work.done));
  }

  void on_reply(std::uint64_t id, std::error_code ec, std::string payload, std::string detail) {
    auto it = open_requests_.find(id);
    if (it == open_requests_.end()) return;
    auto done = std::move(it->second);
    open_requests_.erase(it);
    ctx_.count_bytes_in(payload.size());
    done(ec, std::move(payload), std::move(detail));
  }

  void fail_open_requests(std::error_code ec, const std::string& detail) {
    auto open = std::move(open_requests_);
    open_requests_.clear();
    for (auto& [id, done] : open) done(ec, {}, detail);
  }

  void on_delivery(std::uint64_t generation, Delivery d) {
    if (generation != generation_ || session_ == 0) return;  // the broker requeued it already
    auto it = subs_.find(d.subscription);
    if (it == subs_.end()) {
      if (d.request)
        broker_->reply(session_, d.delivery_id, {}, make_error_code(errc::no_responder),
                       "unsubscribed");
      else
        broker_->nack(session_, d.delivery_id, std::chrono::milliseconds(0));
      return;
    }
    ctx_.count_bytes_in(d.payload->size());
    auto state = ctx_.make_message(weak_from_this());
    state->topic = it->second.spec.topic;
    state->payload = *d.payload;
    state->buffer = std::move(d.payload);
    state->id.assign_number(d.request ? d.delivery_id : d.offset);
    state->attempts = d.attempts;
    state->timestamp_ns = d.timestamp_ns;
    if (!d.request) state->offset = d.offset + 1;
    state->expects_reply = d.request;
    state->adapter_token = d.delivery_id;
    it->second.sink->deliver(Message(std::move(state)));
  }

  AdapterContext ctx_;
  std::shared_ptr<BrokerImpl> broker_;
  std::string endpoint_;
  std::chrono::milliseconds msg_timeout_;
  ReconnectLoop reconnect_;
  std::uint64_t client_id_;
  std::uint64_t session_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t next_sub_ = 0;
  std::uint64_t next_request_ = 0;
  bool closed_ = false;
  std::map<std::uint64_t, SubRecord> subs_;
  std::deque<PublishWork> waiting_publishes_;
  std::size_t waiting_publish_messages_ = 0;  // their messages (a batch counts each)
  std::deque<RequestWork> waiting_requests_;
  std::unordered_map<std::uint64_t, OpCompletion> open_requests_;

  friend class MemSubscription;
};

class MemSubscription : public AdapterSubscription {
 public:
  MemSubscription(std::shared_ptr<MemSession> session, std::uint64_t id)
      : session_(std::move(session)), id_(id) {}
  void unsubscribe(OpCompletion done) override { session_->unsubscribe(id_, std::move(done)); }
  void pause() override { session_->set_flow(id_, true, std::nullopt); }
  void resume() override { session_->set_flow(id_, false, std::nullopt); }
  void set_max_in_flight(std::uint32_t n) override { session_->set_flow(id_, std::nullopt, n); }

 private:
  std::shared_ptr<MemSession> session_;
  std::uint64_t id_;
};

std::shared_ptr<AdapterSubscription> MemSession::subscribe(const SubscribeSpec& spec,
                                                           std::shared_ptr<SubscriptionSink> sink,
                                                           bool serve) {
  std::uint64_t id = ++next_sub_;
  const bool anonymous = spec.group.empty();
  std::string group =
      anonymous ? "~" + std::to_string(client_id_) + "-" + std::to_string(id) : spec.group;
  if (!anonymous && spec.group[0] == '~')
    throw Error(errc::invalid_argument, "mem: group names may not begin with '~'");
  auto& sub =
      subs_.emplace(id, SubRecord{spec, std::move(sink), group, anonymous, serve}).first->second;
  if (session_ != 0) establish(id, sub);
  return std::make_shared<MemSubscription>(shared_from_this(), id);
}

class MemAdapter : public Adapter {
 public:
  MemAdapter(AdapterContext& context, std::shared_ptr<BrokerImpl> broker)
      : session_(std::make_shared<MemSession>(context, std::move(broker))) {
    session_->start();
  }
  ~MemAdapter() override = default;

  Capabilities capabilities() const override { return mem_capabilities(); }
  void publish(PublishWork work) override { session_->publish(std::move(work)); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    return session_->subscribe(spec, std::move(sink), false);
  }
  std::shared_ptr<AdapterSubscription> serve(const ServeSpec& serve,
                                             std::shared_ptr<SubscriptionSink> sink) override {
    // As many requests handed out at once as the core runs handlers for them.
    SubscribeSpec spec{
        serve.topic, {}, std::nullopt, std::max<std::uint32_t>(1, serve.concurrency)};
    return session_->subscribe(spec, std::move(sink), true);
  }
  void request(RequestWork work) override { session_->request(std::move(work)); }
  void ping(OpCompletion done) override { session_->ping(std::move(done)); }
  void close(Clock::time_point, std::function<void()> done) override {
    session_->close(std::move(done));
  }

 private:
  std::shared_ptr<MemSession> session_;
};

}  // namespace

void register_scheme() {
  SchemeInfo info;
  info.scheme = "mem";
  info.summary = "in-process broker (mem://name): groups, acks, replay, request/reply";
  info.options = core_option_table();
  info.options.add({{"msg_timeout", OptionType::duration, "60s", 1, 3'600'000,
                     "a delivered message not acked within this is redelivered"}});
  info.capabilities = mem_capabilities();
  info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
    const auto& url = context.url();
    if (url.hosts.size() != 1 || url.hosts[0].port != 0 || !url.path.empty())
      throw Error(errc::invalid_url, "mem: expected mem://name (one name, no port, no path)");
    return std::make_unique<MemAdapter>(context, Broker::get(url.hosts[0].host)->impl());
  };
  polybus::register_scheme(std::move(info));
}

}  // namespace polybus::mem
