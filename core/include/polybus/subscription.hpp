// A live subscription (or serve() registration). Destroying the handle does not unsubscribe;
// unsubscribe() or closing the client does.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "polybus/message.hpp"
#include "polybus/status.hpp"

namespace polybus {

namespace detail {
class SubscriptionCore;
}

using MessageHandler = std::function<void(Message&)>;
// A serve() handler returns the reply payload; throwing sends an error reply (handler_failed).
using ServeHandler = std::function<std::string(Message&)>;
using DiscardCallback = std::function<void(const Message&)>;

struct SubscribeOptions {
  std::string group;  // NSQ channel, mem:// group; empty: every message, on its own
  std::optional<std::uint64_t> from_offset;  // replay from here; empty: the latest message
  std::uint32_t max_in_flight = 0;           // 0: the client's max_in_flight option
  std::uint32_t concurrency = 0;             // handler threads; 0: the client's default
  std::uint32_t max_attempts = 0;            // 0: the client's max_attempts option (0 = no limit)
  DiscardCallback on_discard;  // a message over max_attempts is given here, then acked
};

class Subscription {
 public:
  Subscription() = default;
  explicit Subscription(std::shared_ptr<detail::SubscriptionCore> core) : core_(std::move(core)) {}

  // Waits until the broker confirmed the subscription (or refused it), up to timeout.
  Status wait_ready(std::chrono::milliseconds timeout) const;
  // Stops delivery at once; completes when the broker was told (or the deadline passed).
  void unsubscribe(std::function<void(const Status&)> done = {});
  Status unsubscribe_sync(std::chrono::milliseconds timeout);
  void pause();
  void resume();
  void set_max_in_flight(std::uint32_t n);
  bool active() const;
  // Messages being handled or waiting for a handler thread.
  std::size_t pending() const;

  explicit operator bool() const { return static_cast<bool>(core_); }

 private:
  std::shared_ptr<detail::SubscriptionCore> core_;
};

}  // namespace polybus
