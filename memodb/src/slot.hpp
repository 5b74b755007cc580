// SPDX-License-Identifier: Apache-2.0
// Internal: what a request or a worker keeps of its exchange with the broker on the req0 socket.
#pragma once

#include <chrono>
#include <cstdint>

#include "req0_socket.hpp"

namespace polybus::memodb::detail {

// A safety margin on top of the broker's own timings before a request or a worker's message is
// resent.
inline constexpr std::chrono::milliseconds kResendMargin{1000};

struct Slot {
  explicit Slot(std::uint64_t k) : key(k) {}
  const std::uint64_t key;
  Req0Socket::ExchangeId exchange = 0;  // 0: none under way
  bool pending = false;                 // an exchange was started and its reply not yet handled
};

// Whether any slot of a map of key to slot pointer has an exchange under way.
template <typename Slots>
bool any_pending(const Slots& slots) {
  for (const auto& entry : slots)
    if (entry.second->pending) return true;
  return false;
}

}  // namespace polybus::memodb::detail
