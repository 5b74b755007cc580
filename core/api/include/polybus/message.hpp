// A received message. Cheap to copy (a shared handle); the payload is a view into the buffer the
// adapter read it into, kept alive by the message, so delivery copies no payload.
#pragma once

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

namespace detail {
struct MessageState;
class ClientShared;
struct SubscriptionCells;
}  // namespace detail

class Message {
 public:
  Message() = default;
  explicit Message(std::shared_ptr<detail::MessageState> state) : state_(std::move(state)) {}

  const std::string& topic() const;
  std::string_view payload() const;
  // Protocol message id (NSQ's 16-byte id, mem's sequence); empty where the protocol has none.
  const std::string& id() const;
  // Delivery attempts including this one (1 on first delivery); 1 where the protocol has none.
  std::uint32_t attempts() const;
  // Broker timestamp (nanoseconds since the epoch) where the protocol has one.
  std::optional<std::int64_t> timestamp_ns() const;
  // Offset token to resume after this message (subscribe from it to get the next one).
  std::optional<std::uint64_t> offset() const;
  // The envelope's attributes (envelope=cloudevents): the publisher's headers, and id, source,
  // type, time, specversion and datacontenttype. Empty without an envelope, and for a payload
  // that was not a valid one (delivered raw, as it came).
  const Headers& headers() const;
  // True for requests delivered to serve() handlers.
  bool expects_reply() const;

  // Responses. Each returns at once; an error here means the response was not sent (already
  // responded, not supported, client closed). Broker-side failures (e.g. NSQ's E_FIN_FAILED)
  // arrive through the client's error callback.
  std::error_code ack();
  std::error_code nack(std::chrono::milliseconds delay = std::chrono::milliseconds(-1));
  std::error_code touch();
  std::error_code reply(std::string payload);
  // The handler keeps the message: it is not acked on return nor nacked on throw.
  void take_manual_control();
  bool responded() const;

  explicit operator bool() const { return static_cast<bool>(state_); }
  const std::shared_ptr<detail::MessageState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::MessageState> state_;
};

}  // namespace polybus
