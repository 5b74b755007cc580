// SPDX-License-Identifier: Apache-2.0
// The interface a protocol adapter implements, and what the core gives it. Applications do not
// use this header; adapter authors do. Every Adapter method is called on the client's strand and
// every completion and callback it makes must be made on that strand.
#pragma once

#include "polybus/export.hpp"

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "polybus/adapter/budget.hpp"
#include "polybus/adapter/clock.hpp"
#include "polybus/adapter/message_id.hpp"
#include "polybus/adapter/payloads.hpp"
#include "polybus/adapter/topic_name.hpp"
#include "polybus/backoff.hpp"
#include "polybus/capabilities.hpp"
#include "polybus/events.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/message.hpp"
#include "polybus/options.hpp"
#include "polybus/url.hpp"

namespace polybus {

using Strand = asio::strand<asio::io_context::executor_type>;

namespace detail {
class BlockPool;
struct Operation;
struct PublishNodeCells;
}  // namespace detail

// Exactly-once completion of one pending operation. The core has already armed its deadline:
// whichever comes first, the adapter's call or the deadline, wins; later calls are ignored.
class POLYBUS_API OpCompletion {
 public:
  OpCompletion() = default;
  explicit OpCompletion(std::shared_ptr<detail::Operation> op) : op_(std::move(op)) {}
  void operator()(std::error_code ec, std::string reply = {}, std::string detail = {});
  bool done() const;  // completed already (by the deadline, for instance): skip the work
  Clock::time_point deadline() const;
  explicit operator bool() const { return static_cast<bool>(op_); }
  // Which operation this is (for the core's bookkeeping; adapters need not use it).
  const detail::Operation* operation() const { return op_.get(); }

 private:
  std::shared_ptr<detail::Operation> op_;
};

struct POLYBUS_API PublishWork {
  TopicName topic;    // the client's shared copy: keep it, rather than a string copied from it
  Payloads payloads;  // one for publish(), several for publish_batch()
  std::chrono::milliseconds defer{0};
  OpCompletion done;
};

struct POLYBUS_API RequestWork {
  std::string topic;
  std::string payload;
  OpCompletion done;  // completes with the reply payload
};

struct POLYBUS_API SubscribeSpec {
  std::string topic;
  std::string group;  // empty: the subscription gets every message on its own
  std::optional<std::uint64_t> from_offset;  // empty: start at the latest message
  std::uint32_t max_in_flight = 1;
};

struct POLYBUS_API ServeSpec {
  std::string topic;
  std::uint32_t concurrency = 1;  // handlers the core runs at once for it (workers, for MemoDB)
};

// How an adapter hands messages to the core's dispatcher for one subscription.
class POLYBUS_API SubscriptionSink {
 public:
  virtual ~SubscriptionSink() = default;
  virtual void deliver(Message message) = 0;
  // The broker confirmed the subscription (or refused it).
  virtual void ready(std::error_code ec, const std::string& detail = {}) = 0;
  // The subscription ended on the broker's side for good (not a reconnect).
  virtual void ended(std::error_code ec, const std::string& detail = {}) = 0;
};

class POLYBUS_API AdapterSubscription {
 public:
  virtual ~AdapterSubscription() = default;
  virtual void unsubscribe(OpCompletion done) = 0;
  virtual void pause() = 0;
  virtual void resume() = 0;
  // Back-pressure from the core's budget (more waits for handlers than max_held_*): stop the
  // inflow without losing anything until hold(false). An adapter whose pause is costly or lossy
  // under quick cycles stops reading instead: it overrides hold() and says so in has_own_hold().
  // Otherwise the core never calls hold(): it keeps the adapter paused while the application
  // or the budget wants it paused, so releasing one does not undo the other.
  virtual bool has_own_hold() const { return false; }
  virtual void hold(bool) {}
  virtual void set_max_in_flight(std::uint32_t n) = 0;
  // How often a delivered message must be touched not to be sent again (half of NSQ's
  // msg_timeout, say): the core has what an application's pause holds touched at this pace,
  // through touch_held(). Zero: the broker never takes a message back by itself. Strand.
  virtual std::chrono::milliseconds held_touch_interval() const {
    return std::chrono::milliseconds(0);
  }
  // Strand: touch these, held unacknowledged by a pause. Those whose connection has ended are
  // skipped quietly: the broker sends them again whatever is done here.
  virtual void touch_held(const std::vector<Message>& held) { (void)held; }
};

// Responses to delivered messages; a MessageState points at one of these.
class POLYBUS_API MessageBackend {
 public:
  virtual ~MessageBackend() = default;
  virtual void ack(detail::MessageState& message) = 0;
  virtual void nack(detail::MessageState& message, std::chrono::milliseconds delay) = 0;
  virtual void touch(detail::MessageState& message) = 0;
  virtual void reply(detail::MessageState& message, std::string payload, std::error_code ec,
                     std::string detail) = 0;
};

class AdapterContext;

class POLYBUS_API Adapter {
 public:
  virtual ~Adapter() = default;
  virtual Capabilities capabilities() const = 0;
  virtual void publish(PublishWork work) = 0;
  virtual std::shared_ptr<AdapterSubscription> subscribe(
      const SubscribeSpec& spec, std::shared_ptr<SubscriptionSink> sink) = 0;
  virtual void request(RequestWork work);
  virtual std::shared_ptr<AdapterSubscription> serve(const ServeSpec& spec,
                                                     std::shared_ptr<SubscriptionSink> sink);
  // Ping the broker (health check); completes when it answered.
  virtual void ping(OpCompletion done);
  // Where the protocol has no request/reply of its own (request_reply false), the core carries
  // it over topics when the envelope is on: the name of the topic this client's replies come to,
  // made from a name unique to the client (NSQ makes it ephemeral, so it goes with the client).
  // Throws Error(not_supported, why) where replies could not reach the client that way.
  virtual std::string reply_topic(std::string_view unique_name) const;
  // Publishes and handlers have drained (or the deadline passed): close connections, then call
  // done. Pending adapter work may be abandoned; the core fails what is left with errc::closed.
  virtual void close(Clock::time_point deadline, std::function<void()> done) = 0;
};

// Given to an adapter's factory: the strand, the options and the event hooks.
class POLYBUS_API AdapterContext {
 public:
  AdapterContext(Strand strand, Url url, ResolvedOptions options,
                 std::shared_ptr<detail::ClientShared> shared);

  const Strand& strand() const { return strand_; }
  const Url& url() const { return url_; }
  const ResolvedOptions& options() const { return options_; }
  // The client-wide limits on what the wire may make this client hold (budget.hpp).
  const Budget& budget() const { return budget_; }

  // A connection's state. For disconnected and reconnecting: the reason, its cause in words
  // (what failed, with the OS or server text), and for reconnecting the wait before the next
  // attempt. Operations that fail for want of a connection name this cause.
  void state(ConnectionState state, const std::string& endpoint, std::error_code reason = {},
             const std::string& detail = {},
             std::chrono::milliseconds retry_in = std::chrono::milliseconds(0)) const;
  void error(std::error_code ec, const std::string& message) const;
  void log(LogLevel level, std::string_view text) const;
  bool logs(LogLevel level) const;
  void count_bytes_in(std::size_t n) const;
  void count_bytes_out(std::size_t n) const;
  void count_reconnect() const;
  // The reconnect policy: ConnectOptions::reconnect_backoff, else the reconnect_* options.
  Backoff backoff() const;
  // ConnectOptions::reconnect_backoff was given (an adapter that cannot follow it refuses it).
  bool has_custom_backoff() const;
  // ConnectOptions::clock: what a test may move (backoff, deadlines, delays) waits on it, in a
  // ClockTimer. Null: the real clock.
  const std::shared_ptr<ManualClock>& clock() const;
  // The time of clock(): deadlines and delays are reckoned from it.
  Clock::time_point now() const;

  // The cells of a node publishes are spread over, counted in Client::metrics() while the
  // adapter holds them (polybus/adapter/publish_node.hpp).
  std::shared_ptr<detail::PublishNodeCells> publish_node(std::string address) const;

  // What the adapter holds unsent now, for Client::metrics(): publishes waiting for a connection
  // or for room in a window, requests waiting for a free slot or a connection. Said again after
  // each change of the count (0 once the close has failed them).
  void waiting_publishes(std::size_t count) const;
  void waiting_requests(std::size_t count) const;

  // Builds a message for delivery; the adapter fills the fields it has.
  std::shared_ptr<detail::MessageState> make_message(std::weak_ptr<MessageBackend> backend) const;

  const std::shared_ptr<detail::ClientShared>& shared() const { return shared_; }

 private:
  Strand strand_;
  Url url_;
  ResolvedOptions options_;
  Budget budget_;
  std::shared_ptr<detail::ClientShared> shared_;
  std::shared_ptr<detail::BlockPool> message_blocks_;  // in shared_: the pool messages come from
};

namespace detail {

// The shared part of a message: fields set by the adapter before delivery, response state after.
struct POLYBUS_API MessageState {
  // The topic: shared_topic, the subscription's own string shared with each message, when the
  // adapter sets it (a copy per message allocates once a topic outgrows a string's inline
  // storage); else topic. Read it through topic_name().
  std::string topic;
  std::shared_ptr<const std::string> shared_topic;
  const std::string& topic_name() const { return shared_topic ? *shared_topic : topic; }
  std::shared_ptr<const void> buffer;  // keeps payload's bytes alive
  std::string_view payload;
  Headers headers;             // from the envelope, when the client has one
  std::string unwrapped;       // the envelope's data, when it is not a view into buffer
  bool envelope_read = false;  // the client's envelope looked at it (once, however often handled)
  MessageId id;
  std::uint32_t attempts = 1;
  std::optional<std::int64_t> timestamp_ns;
  std::optional<std::uint64_t> offset;
  bool expects_reply = false;
  std::uint64_t adapter_token = 0;  // the adapter's own (connection generation, etc.)
  std::weak_ptr<MessageBackend> backend;
  // A request that came over a topic (request/reply over topics): the adapter's backend, which
  // acknowledges it once answered; backend is then the client's, which sends the reply.
  std::weak_ptr<MessageBackend> request_backend;
  // Kept alive by the state's own allocation (AdapterContext::make_message), which holds it.
  ClientShared* client = nullptr;
  std::shared_ptr<SubscriptionCells> subscription_cells;  // set by the subscription it reached
  std::atomic<bool> responded{false};
  std::atomic<bool> manual{false};
};

// A Message's state, for the client and adapters: applications see none of it.
struct MessageAccess {
  static const std::shared_ptr<MessageState>& state(const Message& message) {
    return message.state_;
  }
};
inline const std::shared_ptr<MessageState>& state_of(const Message& message) {
  return MessageAccess::state(message);
}

}  // namespace detail

}  // namespace polybus
