// SPDX-License-Identifier: Apache-2.0
#include "flush_epochs.hpp"

#include <algorithm>

namespace polybus::detail {

std::uint64_t FlushEpochs::enter() noexcept {
  // A publish racing a flush may land on either side of it: it was not made before the call.
  const std::uint64_t epoch = epoch_.load();
  slot(epoch).fetch_add(1);
  return epoch;
}

void FlushEpochs::leave(std::uint64_t epoch) {
  if (slot(epoch).fetch_sub(1) != 1 || waiting_.load() == 0) return;
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready = take_ready();
  }
  for (auto& done : ready) done();
}

std::uint64_t FlushEpochs::pending_before(std::uint64_t epoch) {
  std::uint64_t pending = 0;
  const std::uint64_t first = epoch > kSlots - 1 ? epoch - (kSlots - 1) : 1;
  for (std::uint64_t e = first; e < epoch; ++e) pending += slot(e).load();
  return pending;
}

std::vector<std::function<void()>> FlushEpochs::take_ready() {
  std::vector<std::function<void()>> ready;
  auto drained = [&](Waiter& w) {
    if (pending_before(w.epoch) != 0) return false;
    ready.push_back(std::move(w.done));
    return true;
  };
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), drained), waiters_.end());
  waiting_.store(waiters_.size());
  return ready;
}

std::uint64_t FlushEpochs::wait(std::function<void()> done) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Counted as waiting before the counts are read: a leave() that empties a slot after they
  // were read then sees a waiter, takes the lock (once this is registered) and finds it.
  waiting_.fetch_add(1);
  const std::uint64_t epoch = epoch_.fetch_add(1) + 1;
  if (pending_before(epoch) == 0) {
    waiting_.fetch_sub(1);
    return 0;
  }
  const std::uint64_t ticket = next_ticket_++;
  waiters_.push_back(Waiter{ticket, epoch, std::move(done)});
  return ticket;
}

bool FlushEpochs::cancel(std::uint64_t ticket, std::uint64_t& pending) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [&](const Waiter& w) { return w.ticket == ticket; });
  if (it == waiters_.end()) return false;
  pending = pending_before(it->epoch);
  waiters_.erase(it);
  waiting_.store(waiters_.size());
  return true;
}

}  // namespace polybus::detail
