// SPDX-License-Identifier: Apache-2.0
#include "consumer.hpp"

#include <algorithm>
#include <set>

#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/error.hpp"
#include "polybus/text/text.hpp"

namespace polybus::nsq {
namespace {

// A message names its connection attempt: the connection's key and its generation.
std::uint64_t token_of(std::uint64_t key, std::uint64_t generation) {
  return (key << 32) | (generation & 0xffffffff);
}
std::uint64_t key_of(std::uint64_t token) {
  return token >> 32;
}
std::uint64_t generation_of(std::uint64_t token) {
  return token & 0xffffffff;
}

}  // namespace

Consumer::Consumer(std::shared_ptr<const AdapterContext> context, Settings settings,
                   std::string topic, std::string channel, std::uint32_t max_in_flight,
                   Discovery discovery, std::shared_ptr<SubscriptionSink> sink)
    : context_(std::move(context)),
      settings_(std::move(settings)),
      topic_(std::move(topic)),
      shared_topic_(std::make_shared<const std::string>(topic_)),
      channel_(std::move(channel)),
      max_in_flight_(max_in_flight),
      discovery_(std::move(discovery)),
      sink_(std::move(sink)),
      rdy_backoff_(
          settings_.backoff_full_jitter
              ? Backoff::full_jitter(settings_.backoff_multiplier, settings_.max_backoff_duration)
              : Backoff::exponential(settings_.backoff_multiplier, settings_.max_backoff_duration)),
      backoff_timer_(context_->strand(), context_->clock()),
      redistribute_timer_(context_->strand()),
      poll_timer_(context_->strand(), context_->clock()),
      dial_pacer_(context_->strand(), settings_.max_dials_per_second),
      stop_timer_(context_->strand()) {}

void Consumer::start() {
  if (discovery_.lookupds.empty()) {
    for (const auto& target : discovery_.nsqds) connect(add_conn(target));
  } else {
    poll_lookupd();
  }
  redistribute();
}

Consumer::Conn& Consumer::add_conn(const HostPort& target) {
  auto conn = std::make_unique<Conn>();
  conn->key = ++next_key_;
  conn->target = target;
  conn->reconnect = std::make_unique<ReconnectLoop>(context_, target.to_string());
  std::weak_ptr<Consumer> weak = shared_from_this();
  const std::uint64_t key = conn->key;
  auto with = [weak, key](auto fn) {
    return [weak, key, fn](auto&&... args) {
      auto self = weak.lock();
      if (!self) return;
      if (Conn* c = self->find_conn(key)) fn(*self, *c, std::forward<decltype(args)>(args)...);
    };
  };
  Connection::Events events;
  events.on_ready = with([](Consumer& self, Conn& c) { self.on_ready(c); });
  events.on_message =
      with([](Consumer& self, Conn& c, const MessageView& m,
              const std::shared_ptr<const void>& owner) { self.on_message(c, m, owner); });
  events.on_response =
      with([](Consumer& self, Conn& c, std::string_view body) { self.on_response(c, body); });
  // The backoff starts over once the connection has shown it works (a heartbeat, or a message
  // within RDY), not at SUB's OK: a server that accepts and then breaks must wait longer.
  events.on_heartbeat = with([](Consumer&, Conn& c) { c.reconnect->proven(); });
  events.on_server_error = with([](Consumer& self, Conn& c, const ServerError& e) {
    const std::string text =
        c.target.to_string() + ": " + std::string(e.code_text) + " " + std::string(e.description);
    if (!c.subscribed && !self.ready_reported_ && refuses_for_good(e.code)) {
      // The handshake or SUB refused for a reason a retry cannot change (a bad name, no
      // authorisation): the subscription fails now with nsqd's words, and nothing reconnects.
      self.ready_reported_ = true;
      self.sink_->ended(make_error_code(e.code), "nsqd refused the subscription to '" +
                                                     self.topic_ + "'/'" + self.channel_ +
                                                     "': " + text);
      self.stop(Clock::now(), {});
      return;
    }
    if (!c.subscribed) {
      // Refused for a reason a later connection may not have (E_INVALID "cannot SUB in current
      // state", say): nsqd closes the connection after it. The connection ends with nsqd's
      // words, which its reconnect reports, and the subscription carries on.
      c.connection->fail(make_error_code(e.code), text);
      return;
    }
    // FIN/REQ/TOUCH for a message that timed out on nsqd: it is redelivered, the connection stays.
    self.context_->error(make_error_code(e.code), text);
  });
  events.on_closed = with([](Consumer& self, Conn& c, std::error_code ec,
                             const std::string& detail) { self.on_closed(c, ec, detail); });
  conn->connection = Connection::create(context_, target, settings_.machine, settings_.transport,
                                        settings_.read_timeout, std::move(events));
  Conn& ref = *conn;
  conns_.emplace(key, std::move(conn));
  return ref;
}

// What nsqd answers the same way on every connection: a name it will never accept, an
// IDENTIFY it cannot take, authorisation missing or refused. E_INVALID is not among them: nsqd
// sends it for a command out of place ("cannot SUB in current state"), which a new connection
// does not repeat.
bool Consumer::refuses_for_good(errc code) {
  switch (code) {
    case errc::e_bad_topic:
    case errc::e_bad_channel:
    case errc::e_identify_failed:
    case errc::e_auth_first:
    case errc::e_auth_disabled:
    case errc::e_auth_failed:
    case errc::e_unauthorized:
      return true;
    default:
      return false;
  }
}

Consumer::Conn* Consumer::find_conn(std::uint64_t key) {
  auto it = conns_.find(key);
  return it == conns_.end() ? nullptr : it->second.get();
}

void Consumer::remove_conn(std::uint64_t key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  if (stopping_)
    it->second->reconnect->closed();
  else
    it->second->reconnect->cancel();
  // FINs and REQs written just before must reach nsqd: flush, then close.
  it->second->connection->close_after_flush();
  // Destroyed after the current callback has unwound: it may be running inside this connection.
  asio::post(context_->strand(), [doomed = std::shared_ptr<Conn>(std::move(it->second))] {});
  conns_.erase(it);
}

void Consumer::connect(Conn& conn) {
  conn.reconnect->attempting();
  conn.connection->connect();
}

void Consumer::on_ready(Conn& conn) {
  if (stopping_) return conn.connection->close(), remove_conn(conn.key), check_stopped();
  conn.max_rdy = static_cast<std::uint32_t>(std::clamp<std::int64_t>(
      conn.connection->machine().negotiated().max_rdy_count, 1, UINT32_MAX));
  conn.recent_in_flight.reset(std::chrono::milliseconds(
      std::max<std::int64_t>(1, conn.connection->machine().negotiated().msg_timeout)));
  if (auto ec = conn.connection->machine().subscribe(topic_, channel_)) {
    sink_->ended(ec, "cannot subscribe to '" + topic_ + "'/'" + channel_ + "': " + ec.message());
    return;
  }
}

void Consumer::on_response(Conn& conn, std::string_view body) {
  if (is_ok(body) && !conn.subscribed && !conn.closing) {
    conn.subscribed = true;
    conn.rdy = conn.rdy_ceiling = 0;
    conn.in_flight = 0;  // a new connection holds nothing yet
    if (conn.dialing) {
      conn.dialing = false;
      --dialing_;
      const bool widened = static_cast<bool>(conn.widened);
      conn.widened.release();
      if (widened && conns_.size() - dialing_ > settings_.max_nsqd_connections) {
        // Found live beyond the cap while silent ones were being waited out: let go at once.
        conn.retiring = true;
        conn.connection->machine().close_wait();
        pump_dials();
        return;
      }
      pump_dials();
    }
    conn.reconnect->connected();
    if (!ready_reported_) {
      ready_reported_ = true;
      sink_->ready({});
    }
    update_rdy();
    return;
  }
  if (is_close_wait(body)) {
    conn.closing = true;
    if (conn.in_flight == 0) {
      remove_conn(conn.key);
      check_stopped();
    }
  }
}

void Consumer::on_message(Conn& conn, const MessageView& view,
                          const std::shared_ptr<const void>& owner) {
  // Frames left in a read after this connection was failed: nsqd requeues them.
  if (!conn.connection->ready()) return;
  const auto now = ArrivalClock::now();  // when the read that carried it came
  ++conn.in_flight;
  conn.recent_in_flight.arrived(view.id, now);
  // The unanswered count overstates nsqd's once it timed some out (see InFlightWindow), so
  // only the recent ones are held against RDY.
  if (conn.in_flight > conn.rdy_ceiling && conn.recent_in_flight.recent(now) > conn.rdy_ceiling) {
    conn.connection->fail(make_error_code(polybus::errc::protocol_error),
                          conn.target.to_string() +
                              " ignored RDY: " + std::to_string(conn.recent_in_flight.recent(now)) +
                              " messages in flight that arrived within its msg_timeout, but "
                              "the largest RDY sent is " +
                              std::to_string(conn.rdy_ceiling));
    return;
  }
  conn.reconnect->proven();
  auto state = context_->make_message(weak_from_this());
  state->shared_topic = shared_topic_;
  state->buffer = owner;
  state->payload = view.body;
  state->id.assign(view.id);
  state->attempts = view.attempts;
  state->timestamp_ns = view.timestamp_ns;
  state->adapter_token = token_of(conn.key, conn.connection->generation());
  sink_->deliver(Message(std::move(state)));
}

Consumer::Conn* Consumer::live_conn_of(const detail::MessageState& message) {
  Conn* conn = find_conn(key_of(message.adapter_token));
  if (!conn || !conn->connection->ready() ||
      (conn->connection->generation() & 0xffffffff) != generation_of(message.adapter_token))
    return nullptr;
  return conn;
}

template <typename Fn>
void Consumer::respond(detail::MessageState& message, const char* what, Fn fn) {
  Conn* conn = live_conn_of(message);
  if (!conn) {
    context_->error(make_error_code(polybus::errc::disconnected),
                    std::string(what) + " of message " + message.id.text() + " on '" + topic_ +
                        "' not sent: its connection ended, so nsqd will redeliver the message");
    return;
  }
  if (auto ec = fn(conn->connection->machine())) {
    context_->error(
        ec, std::string(what) + " of message " + message.id.text() + " refused: " + ec.message());
    return;
  }
}

void Consumer::ack(detail::MessageState& message) {
  respond(message, "FIN", [&](Machine& s) { return s.finish(message.id.view()); });
  answered(message);
  signal(Signal::success);
}

void Consumer::nack(detail::MessageState& message, std::chrono::milliseconds delay) {
  auto ms = std::clamp<std::int64_t>(delay.count(), 0, settings_.max_requeue_delay.count());
  respond(message, "REQ",
          [&](Machine& s) { return s.requeue(message.id.view(), static_cast<std::uint32_t>(ms)); });
  answered(message);
  signal(Signal::failure);
}

void Consumer::answered(const detail::MessageState& message) {
  Conn* conn = find_conn(key_of(message.adapter_token));
  // A message of an earlier connection under the same key: that connection's count was reset
  // when it ended, and nsqd requeued the message then.
  if (!conn ||
      (conn->connection->generation() & 0xffffffff) != generation_of(message.adapter_token))
    return;
  if (conn->in_flight > 0) --conn->in_flight;
  conn->recent_in_flight.answered(message.id.view());
  if (conn->closing && conn->in_flight == 0) remove_conn(conn->key), check_stopped();
}

void Consumer::touch(detail::MessageState& message) {
  respond(message, "TOUCH", [&](Machine& s) { return s.touch(message.id.view()); });
}

void Consumer::reply(detail::MessageState& message, std::string, std::error_code, std::string) {
  context_->error(make_error_code(polybus::errc::not_supported),
                  "NSQ has no request/reply: message " + message.id.text() + " cannot be answered");
}

void Consumer::on_closed(Conn& conn, std::error_code ec, const std::string& detail) {
  const std::uint64_t key = conn.key;
  conn.subscribed = conn.closing = false;
  conn.rdy = conn.rdy_ceiling = 0;
  const bool failed_dial = conn.dialing;
  if (conn.dialing) {
    conn.dialing = false;
    --dialing_;
    conn.widened.release();
    // Silent (the attempt timed out) or refused: only waiting out silent ones wants more dials.
    dials_time_out_ = ec == polybus::errc::timeout;
  }
  conn.in_flight = 0;  // nsqd requeues what this connection held
  // A discovery dial that never subscribed: not tried again until nsqlookupd's answer changes.
  if (failed_dial && !discovery_.lookupds.empty()) failed_dials_.insert(conn.target.to_string());
  if (stopping_ || conn.retiring) {
    // A retiring connection's end is still a disconnect the application hears about.
    if (!stopping_) conn.reconnect->retired(ec, detail);
    remove_conn(key);
    check_stopped();
    return;
  }
  conn.reconnect->ended(ec, detail);
  if (!discovery_.lookupds.empty()) {
    // Discovery decides: the next poll reconnects it if nsqlookupd still lists it.
    remove_conn(key);
    pump_dials();
  } else {
    std::weak_ptr<Consumer> weak = shared_from_this();
    conn.reconnect->retry(ec, detail, [weak, key] {
      auto self = weak.lock();
      if (!self || self->stopping_) return;
      if (Conn* c = self->find_conn(key)) self->connect(*c);
    });
  }
  update_rdy();
}

void Consumer::send_rdy(Conn& conn, std::uint32_t count) {
  count = std::min(count, conn.max_rdy);
  if (count == conn.rdy || !conn.subscribed) return;
  conn.rdy = count;
  conn.rdy_ceiling = std::max(conn.rdy_ceiling, count);
  conn.connection->machine().ready_count(count);
}

void Consumer::update_rdy() {
  std::vector<Conn*> live;
  for (auto& [key, conn] : conns_)
    if (conn->subscribed && !conn->closing && !conn->retiring) live.push_back(conn.get());
  if (live.empty()) return;
  const bool hold = stopping_ || paused_ || backoff_waiting_ || max_in_flight_ == 0;
  if (hold) {
    for (auto* c : live) send_rdy(*c, 0);
    return;
  }
  if (backoff_counter_ > 0) {
    // Testing the water after a backoff: one message on one connection.
    Conn* test = find_conn(test_conn_);
    if (!test || std::find(live.begin(), live.end(), test) == live.end()) test = live.front();
    test_conn_ = test->key;
    for (auto* c : live) send_rdy(*c, c == test ? 1 : 0);
    return;
  }
  const std::size_t n = live.size();
  if (max_in_flight_ >= n) {
    const std::uint32_t base = max_in_flight_ / static_cast<std::uint32_t>(n);
    const std::uint32_t extra = max_in_flight_ % static_cast<std::uint32_t>(n);
    for (std::size_t i = 0; i < n; ++i) send_rdy(*live[i], base + (i < extra ? 1 : 0));
  } else {
    // Fewer credits than connections: a rotating subset gets RDY 1, so no nsqd starves.
    for (std::size_t i = 0; i < n; ++i)
      send_rdy(*live[i], ((i + n - rotation_ % n) % n) < max_in_flight_ ? 1 : 0);
  }
}

void Consumer::redistribute() {
  if (stopping_) return;
  std::size_t live = 0;
  for (auto& [key, conn] : conns_) live += conn->subscribed ? 1 : 0;
  if (max_in_flight_ < live) {
    ++rotation_;
    update_rdy();
  }
  redistribute_timer_.expires_after(settings_.rdy_redistribute_interval);
  redistribute_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->redistribute();
  });
}

void Consumer::signal(Signal signal) {
  if (settings_.max_backoff_duration.count() == 0 || backoff_waiting_ || stopping_) return;
  if (signal == Signal::failure) {
    // Stop counting once the wait is already at its cap.
    auto unit = settings_.backoff_multiplier.count();
    if (backoff_counter_ < 31 &&
        (unit << backoff_counter_) < settings_.max_backoff_duration.count() * 2)
      ++backoff_counter_;
  } else if (backoff_counter_ > 0) {
    --backoff_counter_;
  } else {
    return;  // steady state
  }
  if (backoff_counter_ == 0) {
    context_->log(LogLevel::info, topic_ + "/" + channel_ + ": backoff over, full RDY again");
    update_rdy();
    return;
  }
  const auto wait = rdy_backoff_.delay(backoff_counter_);
  backoff_waiting_ = true;
  update_rdy();  // RDY 0 everywhere
  context_->log(LogLevel::warn, topic_ + "/" + channel_ + ": backing off for " +
                                    std::to_string(wait.count()) + "ms (level " +
                                    std::to_string(backoff_counter_) + ")");
  backoff_timer_.expires_after(wait);
  backoff_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->backoff_done();
  });
}

void Consumer::backoff_done() {
  backoff_waiting_ = false;
  // Test with one random connection.
  std::vector<std::uint64_t> keys;
  for (auto& [key, conn] : conns_)
    if (conn->subscribed) keys.push_back(key);
  if (!keys.empty())
    test_conn_ = keys[std::uniform_int_distribution<std::size_t>(0, keys.size() - 1)(random_)];
  update_rdy();
}

void Consumer::poll_lookupd() {
  if (stopping_) return;
  const std::size_t round = ++lookup_round_;
  struct Round {
    std::size_t waiting;
    bool any_answer = false;
    bool topic_known = false;
    std::vector<HostPort> found;
  };
  auto state = std::make_shared<Round>();
  state->waiting = discovery_.lookupds.size();
  std::weak_ptr<Consumer> weak = shared_from_this();
  auto timeout = std::min<std::chrono::milliseconds>(settings_.lookupd_poll_interval * 2,
                                                     settings_.transport.connect_timeout * 2);
  for (const auto& lookupd : discovery_.lookupds) {
    http_get(
        context_, settings_.transport, lookupd, "/lookup?topic=" + text::percent_encode(topic_),
        timeout, [weak, state, round, lookupd](HttpResult result) {
          auto self = weak.lock();
          if (!self || round != self->lookup_round_) return;
          std::vector<LookupProducer> producers;
          std::size_t rejected = 0;
          if (!result.ec && result.status == 200 &&
              !parse_lookup_response(result.body, producers, &rejected)) {
            if (rejected > 0)
              self->context_->error(make_error_code(polybus::errc::protocol_error),
                                    skipped_producers_text(lookupd, rejected, producers.size()));
            state->any_answer = state->topic_known = true;
            for (auto& p : producers) state->found.push_back({p.broadcast_address, p.tcp_port});
          } else if (!result.ec && result.status == 404) {
            state->any_answer = true;  // nobody has the topic yet
          } else {
            self->context_->log(
                LogLevel::warn,
                "nsqlookupd " + lookupd.to_string() + ": " +
                    (result.ec ? result.detail : "HTTP " + std::to_string(result.status)));
          }
          if (--state->waiting > 0) return;
          if (state->any_answer && !state->topic_known) {
            // No nsqd has the topic yet: subscribe on every nsqd nsqlookupd knows, so the
            // channel exists before the first message is published and none is missed.
            auto nodes = std::make_shared<std::vector<HostPort>>();
            auto left = std::make_shared<std::size_t>(self->discovery_.lookupds.size());
            for (const auto& l : self->discovery_.lookupds) {
              http_get(self->context_, self->settings_.transport, l, "/nodes",
                       std::chrono::milliseconds(5000), [weak, round, nodes, left](HttpResult r) {
                         auto me = weak.lock();
                         if (!me || round != me->lookup_round_) return;
                         std::vector<LookupProducer> all;
                         if (!r.ec && r.status == 200 && !parse_lookup_response(r.body, all))
                           for (auto& p : all) nodes->push_back({p.broadcast_address, p.tcp_port});
                         if (--*left == 0) me->on_lookup(round, *nodes, true);
                       });
            }
            return;
          }
          self->on_lookup(round, state->found, state->any_answer);
        });
  }
}

void Consumer::pump_dials() {
  while (!stopping_ && !dial_queue_.empty()) {
    // Those kept (subscribed, or closing) are capped; dials count against the cap too, but for
    // those beyond max_concurrent_dials while dials time out: a silent nsqd is likelier than a
    // live one, and one found live past the cap is let go (on_response).
    const std::size_t kept = conns_.size() - dialing_;
    if (kept >= settings_.max_nsqd_connections) return;
    WidenedDial widened;
    if (dialing_ >= settings_.max_concurrent_dials ||
        conns_.size() >= settings_.max_nsqd_connections) {
      if (!dials_time_out_) return;
      widened = WidenedDial::take();
      if (!widened) return;  // the process's budget is spent: the usual bounds again
    }
    if (!dial_pacer_.admit([weak = weak_from_this()] {
          if (auto self = weak.lock()) self->pump_dials();
        }))
      return;
    Conn& conn = add_conn(dial_queue_.front());
    dial_queue_.pop_front();
    conn.dialing = true;
    conn.widened = std::move(widened);
    ++dialing_;
    connect(conn);
  }
}

void Consumer::on_lookup(std::size_t, std::vector<HostPort> found, bool any_answer) {
  if (stopping_) return;
  if (any_answer) {
    std::set<std::string> wanted;
    for (auto& target : found) wanted.insert(target.to_string());
    dial_queue_.erase(
        std::remove_if(dial_queue_.begin(), dial_queue_.end(),
                       [&](const HostPort& t) { return !wanted.count(t.to_string()); }),
        dial_queue_.end());
    std::set<std::string> have;
    std::vector<std::uint64_t> gone;
    for (auto& [key, conn] : conns_) {
      have.insert(conn->target.to_string());
      if (!wanted.count(conn->target.to_string()) && !conn->retiring) gone.push_back(key);
    }
    // A changed answer may have brought back what failed: everything is a candidate again.
    std::vector<std::string> answer(wanted.begin(), wanted.end());  // sorted, as the set is
    const bool changed = answer != last_answer_;
    if (changed) {
      last_answer_ = std::move(answer);
      failed_dials_.clear();
    }
    // Every producer listed failed and nothing else is left: they are tried again, this poll
    // pacing the passes.
    if (conns_.empty() && dial_queue_.empty() && !failed_dials_.empty() &&
        std::all_of(found.begin(), found.end(),
                    [&](const HostPort& t) { return failed_dials_.count(t.to_string()) > 0; }))
      failed_dials_.clear();
    // Dialled a few at a time, at a bounded rate, and capped in the connections kept: a lookupd
    // listing thousands of nsqd must not open thousands of connections at once. Shuffled, so
    // capped consumers spread out and no order lookupd gives keeps the live ones last.
    std::shuffle(found.begin(), found.end(), random_);
    for (const auto& queued : dial_queue_) have.insert(queued.to_string());
    for (auto& target : found) {
      const std::string key = target.to_string();
      if (have.count(key) || failed_dials_.count(key)) continue;
      have.insert(key);
      dial_queue_.push_back(target);
    }
    if (changed && found.size() > settings_.max_nsqd_connections)
      context_->log(LogLevel::warn,
                    topic_ + ": " +
                        limit_exceeded_text("nsqlookupd lists more nsqd than a subscription uses",
                                            "max_nsqd_connections", settings_.max_nsqd_connections,
                                            found.size()));
    for (auto key : gone) {
      // nsqlookupd no longer lists it: finish what it gave us, then close.
      Conn& conn = *find_conn(key);
      conn.retiring = true;
      if (conn.subscribed) {
        send_rdy(conn, 0);
        conn.connection->machine().close_wait();
      } else {
        remove_conn(key);
      }
    }
    pump_dials();
    if (found.empty() && !ready_reported_) {
      ready_reported_ = true;
      sink_->ready({});
    }
    update_rdy();
  }
  auto jitter = static_cast<std::int64_t>(settings_.lookupd_poll_interval.count() *
                                          settings_.lookupd_poll_jitter *
                                          std::uniform_real_distribution<double>(0, 1)(random_));
  poll_timer_.expires_after(settings_.lookupd_poll_interval + std::chrono::milliseconds(jitter));
  poll_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->poll_lookupd();
  });
}

void Consumer::stop(Clock::time_point deadline, std::function<void()> done) {
  if (stopping_) {
    if (done) done();
    return;
  }
  stopping_ = true;
  stopped_ = std::move(done);
  poll_timer_.cancel();
  dial_pacer_.cancel();
  redistribute_timer_.cancel();
  backoff_timer_.cancel();
  update_rdy();  // RDY 0 everywhere
  std::vector<std::uint64_t> idle;
  for (auto& [key, conn] : conns_) {
    conn->reconnect->cancel();
    if (conn->subscribed) {
      conn->closing = true;
      conn->connection->machine().close_wait();
    } else {
      idle.push_back(key);
    }
  }
  for (auto key : idle) remove_conn(key);
  stop_timer_.expires_at(deadline);
  stop_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self) return;
    std::vector<std::uint64_t> keys;
    for (auto& [key, conn] : self->conns_) keys.push_back(key);
    for (auto key : keys) self->remove_conn(key);
    self->check_stopped();
  });
  check_stopped();
}

void Consumer::check_stopped() {
  if (!stopping_ || !conns_.empty() || !stopped_) return;
  stop_timer_.cancel();
  auto done = std::move(stopped_);
  stopped_ = nullptr;
  done();
}

void Consumer::unsubscribe(OpCompletion done) {
  auto shared = std::make_shared<OpCompletion>(std::move(done));
  // The operation's deadline is on the client's clock, the stop's on the real one.
  const auto deadline = shared->deadline();
  const auto now = context_->now();
  const auto left = deadline > now ? deadline - now : Clock::duration::zero();
  stop(Clock::now() + left, [shared] { (*shared)({}); });
}

void Consumer::pause() {
  paused_ = true;
  update_rdy();
}

void Consumer::resume() {
  paused_ = false;
  touching_since_.reset();
  update_rdy();
}

std::chrono::milliseconds Consumer::held_touch_interval() const {
  std::int64_t shortest = 0;
  for (const auto& [key, conn] : conns_) {
    if (!conn->connection || !conn->connection->ready()) continue;
    const std::int64_t timeout = conn->connection->machine().negotiated().msg_timeout;
    if (timeout > 0 && (shortest == 0 || timeout < shortest)) shortest = timeout;
  }
  return std::chrono::milliseconds(shortest / 2);
}

void Consumer::touch_held(const std::vector<Message>& held) {
  // nsqd takes a message back max_msg_timeout after it sent it, touched or not. These were all
  // sent before the pause began: past that since then, every touch would be refused.
  const auto now = context_->now();  // the core's touches are paced on the client's clock
  if (!touching_since_) touching_since_ = now;
  std::int64_t longest = 0;
  for (const auto& [key, conn] : conns_)
    if (conn->connection && conn->connection->ready())
      longest = std::max(longest, conn->connection->machine().negotiated().max_msg_timeout);
  if (longest > 0 && now - *touching_since_ >= std::chrono::milliseconds(longest)) return;
  for (const auto& message : held) {
    const auto& state = *polybus::detail::state_of(message);
    if (Conn* conn = live_conn_of(state))
      if (auto ec = conn->connection->machine().touch(state.id.view()))
        context_->error(ec,
                        "TOUCH of held message " + state.id.text() + " refused: " + ec.message());
  }
}

void Consumer::set_max_in_flight(std::uint32_t n) {
  max_in_flight_ = n;
  update_rdy();
}

}  // namespace polybus::nsq
