// SPDX-License-Identifier: Apache-2.0
// A received message. Cheap to copy (a shared handle); the payload is a view into the buffer the
// adapter read it into, kept alive by the message, so delivery copies no payload.
#pragma once

#include "polybus/export.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "polybus/capabilities.hpp"
#include "polybus/headers.hpp"

namespace polybus {

class ClientRef;

namespace detail {
struct MessageState;
struct MessageAccess;
class ClientShared;
struct SubscriptionCells;
}  // namespace detail

/// A message handed to a subscribe() or serve() handler, with the means to answer it. A shared
/// handle: a copy answers the same message.
///
/// Responses. Each returns at once; an error here means the response was not sent (already
/// responded, not supported, client closed). Broker-side failures (e.g. NSQ's E_FIN_FAILED)
/// arrive through the client's error callback.
class POLYBUS_API Message {
 public:
  /// An empty handle: accessors return empty values and responses errc::invalid_argument.
  Message() = default;
  /// Made by the client for a delivery; the state is internal.
  explicit Message(std::shared_ptr<detail::MessageState> state) : state_(std::move(state)) {}

  /// The topic it was delivered from (the subscription's topic).
  const std::string& topic() const;
  /// The payload, valid for as long as a copy of the message lives.
  std::string_view payload() const;
  /// Protocol message id (NSQ's 16-byte id, mem's sequence); empty where the protocol has none.
  const std::string& id() const;
  /// Delivery attempts including this one (1 on first delivery); 1 where the protocol has none.
  std::uint32_t attempts() const;
  /// Broker timestamp (nanoseconds since the epoch) where the protocol has one.
  std::optional<std::int64_t> timestamp_ns() const;
  /// Offset token to resume after this message (subscribe from it to get the next one).
  std::optional<std::uint64_t> offset() const;
  /// The envelope's attributes (envelope=cloudevents): the publisher's headers, and id, source,
  /// type, time, specversion and datacontenttype. Empty without an envelope, and for a payload
  /// that was not a valid one (delivered raw, as it came).
  const Headers& headers() const;
  /// True for requests delivered to serve() handlers.
  bool expects_reply() const;

  /// Acknowledges the message: the broker will not send it again. errc::not_supported for a
  /// request or where the scheme has no ack; errc::already_responded after another response.
  std::error_code ack();
  /// Gives the message back for redelivery after `delay`. The default (negative) delay grows
  /// with the attempts: the requeue_delay option times attempts(), at most max_requeue_delay
  /// (0 where the scheme has no nack_with_delay). errc::not_supported for a request, where the
  /// scheme has no ack, and for a delay above 0 without capabilities().nack_with_delay.
  std::error_code nack(std::chrono::milliseconds delay = std::chrono::milliseconds(-1));
  /// Extends the message's timeout, for a slow handler; it may be called many times before the
  /// final response. Needs capabilities().touch (errc::not_supported, and for a request).
  std::error_code touch();
  /// Answers a request with `payload`; errc::not_supported for a message that expects no reply.
  std::error_code reply(std::string payload);
  /// The handler keeps the message: it is not acked on return nor nacked on throw.
  void take_manual_control();
  /// A final response (ack, nack or reply) was made.
  bool responded() const;
  /// The client that delivered it, to publish, request or reply through from the handler
  /// without capturing the client: a reference that does not keep the client alive (an empty
  /// one for an empty Message).
  ClientRef client() const;

  /// False for an empty handle.
  explicit operator bool() const { return static_cast<bool>(state_); }

 private:
  friend struct detail::MessageAccess;  // the client's and adapters' way to the state
  std::shared_ptr<detail::MessageState> state_;
};

}  // namespace polybus
