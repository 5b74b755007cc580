// SPDX-License-Identifier: Apache-2.0
// What a Cancellation shares: whether it was cancelled, and what to call when it is.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "polybus/cancellation.hpp"

namespace polybus::detail {

struct CancellationState {
  std::mutex mutex;
  bool cancelled = false;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::function<void()>> hooks;  // guarded by mutex
};

struct CancellationAccess {
  static const std::shared_ptr<CancellationState>& state(const Cancellation& c) { return c.state_; }
};

// Runs `hook` once when `state` is cancelled (at once, on this thread, if it is already);
// returns the id forget() takes, 0 when it ran at once.
std::uint64_t on_cancel(CancellationState& state, std::function<void()> hook);
// Drops a hook that has not run (its operation completed otherwise).
void forget_cancel(CancellationState& state, std::uint64_t id);

}  // namespace polybus::detail
