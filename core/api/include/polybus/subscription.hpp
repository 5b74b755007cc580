// SPDX-License-Identifier: Apache-2.0
// A live subscription (or serve() registration). Destroying the handle does not unsubscribe;
// unsubscribe() or closing the client does.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "polybus/client_ref.hpp"
#include "polybus/message.hpp"
#include "polybus/status.hpp"

namespace polybus {

namespace detail {
class SubscriptionCore;
}

/// Given a message over max_attempts, before it is acknowledged, on a handler thread; what it
/// throws is reported through the client's error callback.
using DiscardCallback = std::function<void(const Message&)>;
/// A step around every handler: runs on the handler's thread with the message, and calls `next`
/// (the rest of the chain, then the handler) or answers the message itself. What it throws counts
/// as the handler's failure. polybus/middleware.hpp has ready ones.
using Middleware = std::function<void(Message&, const MessageHandler& next)>;

/// Where a message goes when its handler keeps failing: after max_attempts deliveries it is
/// published to `topic` and only then acknowledged. If that publish fails it is not acknowledged:
/// the broker gives it back later (or, where a broker cannot redeliver, the client retries it in
/// place with the subscription's backoff), so nothing is lost. With the publishing client's
/// envelope on, the dead letter keeps the message's headers and gains deadletterreason (what the
/// handler threw), deadletterattempts and deadlettertopic (where it came from).
struct POLYBUS_API DeadLetter {
  std::string topic;  ///< empty: no dead-letter topic
  /// Publishes there (a client of another URL), named, not owned: once that Client is gone the
  /// dead-letter publishes fail with closed (the messages stay unacknowledged). Empty: the
  /// subscribing client.
  ClientRef client;
};

/// How a subscribe(), subscribe_batch() or serve() goes; every field may be left as it is.
struct POLYBUS_API SubscribeOptions {
  /// NSQ channel, mem:// group; empty: every message, on its own. Needs
  /// capabilities().consumer_groups.
  std::string group;
  /// Replay from here (a Message::offset()); empty: the latest message. Needs
  /// capabilities().replay_from_offset.
  std::optional<std::uint64_t> from_offset;
  std::uint32_t max_in_flight = 0;  ///< 0: the client's max_in_flight option
  /// Handlers run at once (handler threads); 0: the client's handler_concurrency option.
  std::uint32_t concurrency = 0;
  std::uint32_t max_attempts = 0;  ///< 0: the client's max_attempts option (0 = no limit)
  DiscardCallback on_discard;      ///< a message over max_attempts is given here, then acked
  /// Instead of on_discard: a message over max_attempts goes to a dead-letter topic. Needs
  /// max_attempts (here or the client's option). Where the broker cannot redeliver (no ack), a
  /// handler that throws is retried in place, with the requeue_delay backoff, up to max_attempts.
  DeadLetter dead_letter;
  /// Around every handler, outermost first: subscribe's, serve's (whose `next` runs the serve
  /// handler and sends its reply) and subscribe_batch's (whose `next` adds the message to the
  /// batch: a middleware sees each message as it joins one).
  std::vector<Middleware> middleware;
};

/// subscribe_batch(): a batch is handed to the handler when it holds max_messages, when max_wait
/// has passed since its first message, or as soon as the broker will send no more until something
/// is answered (every message the subscription may have in flight is in hand: NSQ's RDY, mem's
/// credit), so a batch never waits for messages that cannot come.
struct POLYBUS_API BatchOptions {
  std::uint32_t max_messages = 100;         ///< the most messages in one batch; above 0
  std::chrono::milliseconds max_wait{100};  ///< after its first message; above 0
};

/// The messages of one batch, in the order they arrived. When the handler returns, every message
/// it did not answer itself is acked; when it throws, each is handled as a failed handler's
/// message (nacked, or retried, dead-lettered or discarded by max_attempts). A message it calls
/// take_manual_control() on is left to it.
class POLYBUS_API Batch {
 public:
  using iterator = std::vector<Message>::iterator;              ///< over the messages
  using const_iterator = std::vector<Message>::const_iterator;  ///< over the messages
  /// Made by the client for the handler.
  explicit Batch(std::vector<Message> messages) : messages_(std::move(messages)) {}
  std::size_t size() const { return messages_.size(); }  ///< how many messages it holds
  bool empty() const { return messages_.empty(); }       ///< it holds no message
  /// The message at `i`, in arrival order (unchecked: `i` must be below size()).
  Message& operator[](std::size_t i) { return messages_[i]; }
  /// The message at `i`, in arrival order (unchecked: `i` must be below size()).
  const Message& operator[](std::size_t i) const { return messages_[i]; }
  iterator begin() { return messages_.begin(); }              ///< the first message
  iterator end() { return messages_.end(); }                  ///< past the last message
  const_iterator begin() const { return messages_.begin(); }  ///< the first message
  const_iterator end() const { return messages_.end(); }      ///< past the last message

 private:
  std::vector<Message> messages_;
};

/// The handle of a subscription or serve() registration, shared by its copies. Letting go of it
/// keeps the subscription going: unsubscribe() or closing the client ends it.
class POLYBUS_API Subscription {
 public:
  /// An empty handle: active() is false, pending() 0, and the other calls throw
  /// polybus::Error(errc::invalid_argument).
  Subscription() = default;
  /// Made by the client; the core is internal.
  explicit Subscription(std::shared_ptr<detail::SubscriptionCore> core) : core_(std::move(core)) {}

  /// Waits until the broker confirmed the subscription (or refused it), up to timeout. On the
  /// io thread (a completion, a handler_thread=io handler) it does not wait: unconfirmed there
  /// is errc::would_block_io_thread.
  Status wait_ready(std::chrono::milliseconds timeout) const;
  /// Without waiting: `done` runs once, on the strand, with the broker's confirmation or
  /// refusal, or with errc::timeout at the deadline. From any thread, the io thread included.
  /// Once the client is gone (its Client dropped) it runs at once on the calling thread.
  void wait_ready(std::chrono::milliseconds timeout, std::function<void(const Status&)> done) const;
  /// Stops delivery at once; completes when the broker was told (or the deadline, the
  /// op_timeout option, passed).
  void unsubscribe(std::function<void(const Status&)> done = {});
  /// unsubscribe(), waiting up to `timeout` for it to complete (errc::timeout past it). On the
  /// io thread: errc::would_block_io_thread, and nothing is done (use unsubscribe()).
  Status unsubscribe_sync(std::chrono::milliseconds timeout);
  /// Stops handing messages to the handler at once (a handler already running finishes) and asks
  /// the broker to stop sending. What the broker sent before it heard waits, within the client's
  /// max_held_* budget, until resume(); close() hands it to the handler, unsubscribe gives it back.
  /// Where the broker takes back what stays unacknowledged (NSQ's msg_timeout), what is held is
  /// touched at once and at half that pace, so a pause does not bring duplicates; NSQ's touches
  /// stop at its max_msg_timeout (15 min by default), past which nsqd sends them again anyway.
  void pause();
  /// Undoes pause(): what was held goes to the handler, and the broker is asked to send again.
  void resume();
  /// How many messages the subscription may hold unacknowledged from now on (NSQ's RDY, mem's
  /// credit), in place of SubscribeOptions::max_in_flight.
  void set_max_in_flight(std::uint32_t n);
  /// True until the subscription ends: unsubscribed, refused or ended by the broker, or its
  /// client closed. False for an empty handle.
  bool active() const;
  /// Messages being handled or waiting for a handler thread.
  std::size_t pending() const;

  /// False for an empty handle.
  explicit operator bool() const { return static_cast<bool>(core_); }

 private:
  friend class ClientRef;  // pull_subscribe() ties its inbox to the core
  std::shared_ptr<detail::SubscriptionCore> core_;
};

}  // namespace polybus
