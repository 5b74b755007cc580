// SPDX-License-Identifier: Apache-2.0
// Internal: which publishes a flush waits for. Each publish is counted in the epoch current when
// it was taken in; a flush opens a new epoch and is done once every earlier epoch's count is
// zero. Publishes complete in any order, so a count of completions could not say that; a count
// per epoch can, with one atomic step each way per publish and no lock unless a flush waits.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace polybus::detail {

class FlushEpochs {
 public:
  // Epochs counted at once. A flush waits for the kSlots - 1 epochs before its own; past that
  // many flushes waiting at once, epochs share slots and a flush may also wait for publishes made
  // after it (never for fewer than it should).
  static constexpr std::size_t kSlots = 64;

  // A publish was taken in: the epoch it is counted in (any thread).
  std::uint64_t enter() noexcept;
  // That publish completed (any thread). May run a waiting flush's `done`, without a lock held.
  void leave(std::uint64_t epoch);

  // Opens a new epoch. Returns 0 when nothing before it is pending (`done` is not kept), else a
  // ticket for cancel(); `done` runs once the publishes before it have completed.
  std::uint64_t wait(std::function<void()> done);
  // The flush's deadline passed: true (and `done` dropped) if it was still waiting; `pending`
  // says how many publishes it still waited for.
  bool cancel(std::uint64_t ticket, std::uint64_t& pending);

 private:
  struct Waiter {
    std::uint64_t ticket;
    std::uint64_t epoch;  // the one it opened: everything before it must drain
    std::function<void()> done;
  };
  std::atomic<std::uint64_t>& slot(std::uint64_t epoch) { return counts_[epoch % kSlots]; }
  std::uint64_t pending_before(std::uint64_t epoch);  // with mutex_ held
  std::vector<std::function<void()>> take_ready();    // with mutex_ held

  std::atomic<std::uint64_t> epoch_{1};
  std::array<std::atomic<std::uint64_t>, kSlots> counts_{};
  std::atomic<std::size_t> waiting_{0};  // waiters_.size(), read without the lock by leave()
  std::mutex mutex_;
  std::vector<Waiter> waiters_;  // guarded by mutex_
  std::uint64_t next_ticket_ = 1;
};

}  // namespace polybus::detail
