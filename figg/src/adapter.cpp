// The Figg adapter: one connection, reconnecting forever with backoff; publishes through a
// fixed window of unacknowledged messages (waiting, up to their deadline, while it is full);
// one subscription per topic, resumed from its last offset after every reconnect.
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <deque>

#include "client_protocol.hpp"
#include "polybus/error.hpp"
#include "polybus/figg.hpp"
#include "polybus/adapter/reconnect.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/adapter/transport.hpp"

namespace polybus::figg {
namespace {

constexpr std::uint16_t kDefaultPort = 8119;

Capabilities figg_capabilities() {
  Capabilities c;
  c.replay_from_offset = true;
  c.ordered_delivery = true;
  c.publish_confirmed = true;
  c.durable = false;  // the real server reloads nothing after a restart
  return c;
}

class FiggClient : public ProtocolHandler, public std::enable_shared_from_this<FiggClient> {
 public:
  FiggClient(const AdapterContext& context)
      : ctx_(context),
        endpoint_(context.url().hosts_or_throw(kDefaultPort).front()),
        settings_(TransportSettings::from_options(context.options())),
        protocol_(static_cast<std::size_t>(context.options().get_int("window")),
                  static_cast<std::size_t>(context.options().get_int("max_frame_size")), *this),
        reconnect_(context, endpoint_.to_string()),
        ping_interval_(context.options().get_duration("ping_interval")),
        ping_timer_(context.strand()) {
    if (context.url().hosts.size() != 1)
      throw Error(polybus::errc::invalid_url, "figg: one server address expected (figg://host:port)");
  }

  ~FiggClient() override {
    if (transport_) transport_->close();  // pending reads hold the transport until it closes
  }

  void start() {
    asio::post(ctx_.strand(), [self = shared_from_this()] { self->connect(); });
  }

  void publish(PublishWork work) {
    if (closed_) return work.done(make_error_code(polybus::errc::closed));
    if (work.topic.empty() || work.topic.size() > kMaxTopicLength)
      return work.done(make_error_code(errc::invalid_topic), {}, "figg: topic must be 1-1024 bytes");
    if (protocol_.window_full() || !waiting_.empty()) {
      waiting_.push_back(std::move(work));  // released by ACKs, or failed by the deadline
      return;
    }
    send(work);
  }

  std::error_code attach(const std::string& topic, std::optional<std::uint64_t> from,
                         std::shared_ptr<SubscriptionSink> sink) {
    if (auto ec = protocol_.attach(topic, from)) return ec;
    sinks_[topic] = {std::move(sink), false};
    flush();
    return {};
  }

  void detach(const std::string& topic) {
    protocol_.detach(topic);
    sinks_.erase(topic);
    flush();
  }

  void pause(const std::string& topic) {
    // No flow control in Figg: pausing detaches and remembers the offset to resume from.
    auto it = sinks_.find(topic);
    if (it == sinks_.end() || it->second.paused) return;
    it->second.paused = true;
    it->second.resume_from = protocol_.offset(topic);
    protocol_.detach(topic);
    flush();
  }

  // Budget back-pressure: reading stops while any subscription holds (TCP paces the server; a
  // DETACH/ATTACH per cycle would churn). PONGs are not read meanwhile, so liveness waits too.
  void hold(bool on) {
    holds_ += on ? 1 : -1;
    if (!transport_) return;
    if (holds_ > 0) transport_->pause_reading();
    else transport_->resume_reading();
  }

  void resume(const std::string& topic) {
    auto it = sinks_.find(topic);
    if (it == sinks_.end() || !it->second.paused) return;
    it->second.paused = false;
    protocol_.attach(topic, it->second.resume_from);
    flush();
  }

  void ping(OpCompletion done) {
    // Sent now, or on connecting; an older server never answers PING: the deadline settles it.
    while (!pings_.empty() && pings_.front().second.done()) pings_.pop_front();
    pings_.push_back({++ping_counter_, std::move(done)});
    protocol_.ping(ping_counter_);
    flush();
  }

  void close(std::function<void()> done) {
    closed_ = true;
    reconnect_.cancel();
    ping_timer_.cancel();
    for (auto& [topic, sink] : sinks_) protocol_.detach(topic);
    flush();
    if (transport_) transport_->close_after_flush();  // the DETACHes go out first
    protocol_.fail_all(make_error_code(polybus::errc::closed), "client closed");
    for (auto& work : waiting_) work.done(make_error_code(polybus::errc::closed), {}, "client closed");
    waiting_.clear();
    sinks_.clear();
    ctx_.state(ConnectionState::closed, endpoint_.to_string());
    done();
  }

  // ProtocolHandler
  void on_data(const std::string& topic, std::uint64_t offset, std::string_view data,
               const std::shared_ptr<const void>& owner) override {
    auto it = sinks_.find(topic);
    if (it == sinks_.end() || it->second.paused) return;
    auto state = ctx_.make_message({});
    state->topic = topic;
    state->buffer = owner;
    state->payload = data;
    state->offset = offset;
    state->id = std::to_string(offset);
    it->second.sink->deliver(Message(std::move(state)));
  }
  void on_attached(const std::string& topic, std::uint64_t) override {
    auto it = sinks_.find(topic);
    if (it != sinks_.end() && !it->second.confirmed) {
      it->second.confirmed = true;
      it->second.sink->ready({});
    }
  }
  void on_pong(std::uint64_t timestamp) override {
    server_pongs_ = true;
    missed_pongs_ = 0;
    while (!pings_.empty() && pings_.front().first <= timestamp) {
      pings_.front().second({});
      pings_.pop_front();
    }
  }
  void on_failure(std::error_code ec, const std::string& detail) override {
    if (transport_) transport_->fail(ec, endpoint_.to_string() + ": " + detail);
  }

 private:
  struct SinkEntry {
    std::shared_ptr<SubscriptionSink> sink;
    bool confirmed = false;
    bool paused = false;
    std::optional<std::uint64_t> resume_from;
  };

  void send(PublishWork& work) {
    if (work.done.done()) return;  // its deadline passed while it waited
    auto data = std::make_shared<const std::string>(std::move(work.payloads.front()));
    protocol_.publish(std::move(work.topic), std::move(data), std::move(work.done));
    flush();
  }

  void release_waiting() {
    while (!waiting_.empty() && !protocol_.window_full()) {
      PublishWork work = std::move(waiting_.front());
      waiting_.pop_front();
      send(work);
    }
  }

  void flush() {
    auto& out = protocol_.output();
    if (!transport_ || !protocol_.is_connected()) return out.clear();
    while (!out.empty()) {
      if (out.front().shared) transport_->write(std::move(out.front().shared));
      else transport_->write(std::move(out.front().bytes));
      out.pop_front();
    }
  }

  void connect() {
    if (closed_) return;
    Transport::Callbacks callbacks;
    std::weak_ptr<FiggClient> weak = shared_from_this();
    callbacks.on_connected = [weak] {
      if (auto self = weak.lock()) self->on_connected();
    };
    callbacks.on_data = [weak](const std::shared_ptr<ReadChunk>& chunk, const char* data, std::size_t n) {
      auto self = weak.lock();
      if (!self) return;
      const std::uint64_t frames = self->protocol_.frames();
      self->protocol_.receive(chunk, std::string_view(data, n));
      self->release_waiting();
      self->flush();
      if (self->protocol_.frames() != frames) self->reconnect_.proven();
      if (self->transport_)
        self->transport_->frame_state(self->protocol_.partial_frame(),
                                      self->protocol_.frames() != frames);
    };
    callbacks.on_closed = [weak](std::error_code ec, const std::string& detail) {
      if (auto self = weak.lock()) self->on_closed(ec, detail);
    };
    transport_ = Transport::create(ctx_.strand(), settings_, std::move(callbacks), &ctx_);
    reconnect_.attempting();
    transport_->connect(endpoint_);
    if (holds_ > 0) transport_->pause_reading();
  }

  void on_connected() {
    reconnect_.connected();
    server_pongs_ = false;
    missed_pongs_ = 0;
    protocol_.connected();
    for (auto& ping : pings_) protocol_.ping(ping.first);
    flush();
    arm_ping();
  }

  void on_closed(std::error_code ec, const std::string& detail) {
    protocol_.disconnected();
    ping_timer_.cancel();
    if (closed_) return;
    reconnect_.lost(ec, detail, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->connect();
    });
  }

  // Liveness: PING every ping_interval. Only a server that has answered a PING is held to it
  // (two unanswered in a row drop the connection); the older server never answers and is left
  // alone rather than disconnected for it.
  void arm_ping() {
    if (ping_interval_.count() <= 0) return;
    ping_timer_.expires_after(ping_interval_);
    ping_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->protocol_.is_connected()) return;
      if (self->holds_ > 0) self->missed_pongs_ = 0;  // not reading: no PONG can arrive
      if (self->server_pongs_ && ++self->missed_pongs_ > 2) {
        self->on_failure(make_error_code(polybus::errc::timeout), "two PINGs unanswered: connection presumed dead");
        return;
      }
      self->protocol_.ping(++self->ping_counter_);
      self->flush();
      self->arm_ping();
    });
  }

  AdapterContext ctx_;
  HostPort endpoint_;
  TransportSettings settings_;
  ClientProtocol protocol_;
  ReconnectLoop reconnect_;
  std::chrono::milliseconds ping_interval_;
  asio::steady_timer ping_timer_;
  std::shared_ptr<Transport> transport_;
  std::deque<PublishWork> waiting_;
  std::map<std::string, SinkEntry> sinks_;
  std::deque<std::pair<std::uint64_t, OpCompletion>> pings_;
  std::uint64_t ping_counter_ = 0;
  bool server_pongs_ = false;
  int missed_pongs_ = 0;
  bool closed_ = false;
  int holds_ = 0;  // subscriptions holding the inflow (hold())
};

class FiggSubscription : public AdapterSubscription {
 public:
  FiggSubscription(std::shared_ptr<FiggClient> client, std::string topic)
      : client_(std::move(client)), topic_(std::move(topic)) {}
  void unsubscribe(OpCompletion done) override {
    // DETACHED may never come (the real server ignores DETACH): delivery stops at once.
    client_->detach(topic_);
    hold(false);
    done({});
  }
  void pause() override { client_->pause(topic_); }
  void resume() override { client_->resume(topic_); }
  void hold(bool on) override {
    if (on == held_) return;
    held_ = on;
    client_->hold(on);
  }
  void set_max_in_flight(std::uint32_t) override {}  // Figg has no credit; TCP paces delivery

 private:
  std::shared_ptr<FiggClient> client_;
  std::string topic_;
  bool held_ = false;
};

class FiggAdapter : public Adapter {
 public:
  explicit FiggAdapter(AdapterContext& context) : client_(std::make_shared<FiggClient>(context)) {
    client_->start();
  }
  Capabilities capabilities() const override { return figg_capabilities(); }
  void publish(PublishWork work) override { client_->publish(std::move(work)); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    if (auto ec = client_->attach(spec.topic, spec.from_offset, sink))
      throw Error(ec, "figg: '" + spec.topic + "' already has a subscription on this client");
    return std::make_shared<FiggSubscription>(client_, spec.topic);
  }
  void ping(OpCompletion done) override { client_->ping(std::move(done)); }
  void close(Clock::time_point, std::function<void()> done) override { client_->close(std::move(done)); }

 private:
  std::shared_ptr<FiggClient> client_;
};

}  // namespace

void register_scheme() {
  SchemeInfo info;
  info.scheme = "figg";
  info.summary = "Figg: ordered topics with byte offsets, at-least-once publish window";
  info.options = core_option_table();
  // The Figg Go SDK's reconnect policy: 1 s doubling to 30 s, with jitter.
  info.options.set_default("reconnect_backoff", "exponential_jitter");
  info.options.set_default("reconnect_initial", "1s");
  info.options.set_default("reconnect_max", "30s");
  info.options.add({
      {"window", OptionType::integer, "256", 1, 1 << 20,
       "unacknowledged publishes kept for resending; publish waits while it is full"},
      {"ping_interval", OptionType::duration, "2s", 0, 3'600'000,
       "PING period (0: none); a server that answers PING is dropped after two unanswered"},
  });
  info.capabilities = figg_capabilities();
  info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
    return std::make_unique<FiggAdapter>(context);
  };
  polybus::register_scheme(std::move(info));
}

}  // namespace polybus::figg
