// SPDX-License-Identifier: Apache-2.0
#include "polybus/manual_clock.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace polybus {

namespace {
// The clock whose callback this thread runs, to refuse an advance from inside one.
thread_local const ManualClock* running_callback_of = nullptr;
}  // namespace

struct ManualClock::State {
  explicit State(time_point start) : now(start) {}
  // Runs what comes due up to `to`; the caller has the turn.
  void run_until(const ManualClock* clock, time_point to);

  mutable std::mutex mutex;
  time_point now;
  std::uint64_t next_id = 1;
  // Keyed by (due, id): due order, and ties in the order scheduled.
  std::map<std::pair<time_point, std::uint64_t>, std::function<void()>> scheduled;
  std::map<std::uint64_t, time_point> due_of;
  std::mutex advancing;  // one advance at a time
};

ManualClock::ManualClock(time_point start) : state_(std::make_unique<State>(start)) {}

ManualClock::~ManualClock() = default;

ManualClock::time_point ManualClock::now() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->now;
}

void ManualClock::advance(duration by) {
  if (by < duration::zero()) throw std::invalid_argument("ManualClock::advance: a negative span");
  if (running_callback_of == this)
    throw std::logic_error("ManualClock::advance: called from a callback of the same clock");
  std::lock_guard<std::mutex> turn(state_->advancing);
  state_->run_until(this, now() + by);
}

void ManualClock::advance_to(time_point to) {
  if (running_callback_of == this)
    throw std::logic_error("ManualClock::advance_to: called from a callback of the same clock");
  std::lock_guard<std::mutex> turn(state_->advancing);
  state_->run_until(this, to);
}

void ManualClock::State::run_until(const ManualClock* clock, time_point to) {
  while (true) {
    std::function<void()> fire;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (scheduled.empty() || scheduled.begin()->first.first > to) {
        if (to > now) now = to;
        return;
      }
      auto first = scheduled.begin();
      if (first->first.first > now) now = first->first.first;
      fire = std::move(first->second);
      due_of.erase(first->first.second);
      scheduled.erase(first);
    }
    struct Running {  // restored however fire() ends
      explicit Running(const ManualClock* clock) : outer(running_callback_of) {
        running_callback_of = clock;
      }
      ~Running() { running_callback_of = outer; }
      const ManualClock* outer;
    } running(clock);
    fire();
  }
}

std::uint64_t ManualClock::schedule(time_point due, std::function<void()> fire) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const std::uint64_t id = state_->next_id++;
  state_->scheduled.emplace(std::make_pair(due, id), std::move(fire));
  state_->due_of.emplace(id, due);
  return id;
}

bool ManualClock::cancel(std::uint64_t id) {
  std::function<void()> dropped;  // destroyed outside the lock: it may own anything
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto it = state_->due_of.find(id);
  if (it == state_->due_of.end()) return false;
  const auto entry = state_->scheduled.find({it->second, id});
  dropped = std::move(entry->second);
  state_->scheduled.erase(entry);
  state_->due_of.erase(it);
  return true;
}

std::size_t ManualClock::pending() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->scheduled.size();
}

ManualClock::time_point ManualClock::next_due() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->scheduled.empty() ? time_point::max() : state_->scheduled.begin()->first.first;
}

}  // namespace polybus
