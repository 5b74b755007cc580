// SPDX-License-Identifier: Apache-2.0
// A subscription the application pulls messages from, one at a time, instead of handing them to
// a handler: the form a coroutine's receive loop wants (polybus/asio/async.hpp's async_receive).
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "polybus/message.hpp"
#include "polybus/status.hpp"
#include "polybus/subscription.hpp"

namespace polybus {

namespace detail {
class Inbox;
}  // namespace detail

/// Completes a receive: a message (the Status empty), or the subscription's end (the Status says
/// why: errc::closed for a close or an unsubscribe, else the broker's or the connection's cause)
/// and an empty Message.
using ReceiveCompletion = std::function<void(const Status&, Message)>;

/// The messages of one subscription, taken by the application when it is ready for the next
/// (ClientRef::pull_subscribe()). Each comes under the application's control
/// (Message::take_manual_control()): nothing acks it on the application's behalf, so it settles
/// each one itself: ack() once handled, nack() to have it again, reply() to a request. One it
/// drops unanswered is the broker's to send again, as a crashed consumer's is (NSQ's msg_timeout).
///
/// Back-pressure as a handler's: what the broker may send unanswered is the subscription's
/// max_in_flight (NSQ's RDY, mem's credit), and where a protocol has no such window the broker
/// is held back as a slow handler holds it (the max_held_* budget's way: Figg's reading stops,
/// QuickIO's listener pauses) while max_in_flight messages wait here untaken, until half of
/// them were taken. Messages still waiting here are given back (nack with no delay, where the
/// scheme acks) when the client begins to close, so a close does not wait for them, and when
/// the subscription ends; every receive still waiting then completes with the end.
///
/// Cheap to copy: a copy pulls from the same subscription.
class POLYBUS_API PullSubscription {
 public:
  /// An empty handle: receive() completes at once with errc::invalid_argument.
  PullSubscription() = default;
  /// Made by the client; the inbox is internal.
  PullSubscription(std::shared_ptr<detail::Inbox> inbox, Subscription subscription)
      : inbox_(std::move(inbox)), subscription_(std::move(subscription)) {}

  /// Asks for the next message: `done` runs once, at once on this thread when one is waiting,
  /// else on the handler thread that took it from the broker, or with the subscription's end.
  /// Receives waiting together are answered in the order they were made. Returns the receive's
  /// ticket, for cancel_receive().
  std::uint64_t receive(ReceiveCompletion done) const;
  /// Takes back a receive still waiting: its `done` is dropped, never run, and true is returned.
  /// False when it was answered already or is being answered (its message is on its way to it).
  bool cancel_receive(std::uint64_t ticket) const;
  /// The next message if one is waiting, without waiting.
  std::optional<Message> try_receive() const;
  /// Waits up to `timeout` for the next message: errc::timeout past it, the end as receive()
  /// gives it. On a thread that runs the client's io_context: errc::would_block_io_thread (use
  /// receive() there).
  std::pair<Status, Message> receive_sync(std::chrono::milliseconds timeout) const;

  /// The subscription behind it: wait_ready(), unsubscribe(), pause()...
  Subscription subscription() const { return subscription_; }
  /// The topic it pulls from.
  const std::string& topic() const;
  /// Messages taken from the broker and waiting for a receive.
  std::size_t waiting() const;

  /// False for an empty handle.
  explicit operator bool() const { return static_cast<bool>(inbox_); }

 private:
  std::shared_ptr<detail::Inbox> inbox_;
  Subscription subscription_;
};

}  // namespace polybus
