// SPDX-License-Identifier: Apache-2.0
#include "polybus/adapter/clock_timer.hpp"

#include <asio/error.hpp>
#include <future>
#include <stdexcept>

namespace polybus {

namespace {
// How long ManualClock::advance waits for a timer's executor to run a handler that came due: a
// failure bound, for an executor nobody runs any more.
constexpr std::chrono::seconds kHandlerBound{30};
}  // namespace

// The wait on a ManualClock, touched on the executor's thread only (and by the owner, which
// uses the timer there); the clock's callback holds it weakly and hands the completion to the
// executor.
struct ClockTimer::ManualWait {
  std::shared_ptr<ManualClock> clock;
  std::function<void(std::function<void()>)> post;
  std::function<bool()> in_this_thread;
  time_point expiry{};
  Handler handler;               // the pending wait's
  std::uint64_t generation = 0;  // of the pending wait, so a stale completion is ignored
  std::uint64_t clock_id = 0;    // its callback on the clock; 0: none

  // On the executor: runs the pending wait's handler if it is still wait `of`.
  static void complete(const std::weak_ptr<ManualWait>& weak, std::uint64_t of) {
    const auto self = weak.lock();
    if (!self || self->generation != of || !self->handler) return;
    Handler handler = std::move(self->handler);
    self->handler = nullptr;
    self->clock_id = 0;
    handler(std::error_code{});
  }

  // On the thread that advances the clock: hands wait `of` to the executor and returns once it
  // ran there (or was dropped with its executor), so advance() returns after what came due.
  static void fire(const std::weak_ptr<ManualWait>& weak, std::uint64_t of) {
    auto self = weak.lock();
    if (!self) return;
    if (self->in_this_thread()) return complete(weak, of);
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::shared_ptr<void> signal(nullptr, [done](void*) { done->set_value(); });
    const auto post = self->post;
    self.reset();  // the owner may drop the timer meanwhile
    post([weak, of, signal] { complete(weak, of); });
    signal.reset();
    if (finished.wait_for(kHandlerBound) != std::future_status::ready)
      throw std::runtime_error(
          "ManualClock: a timer's executor did not run the handler that came due");
  }
};

std::shared_ptr<ClockTimer::ManualWait> ClockTimer::make_manual(
    std::shared_ptr<ManualClock> clock, std::function<void(std::function<void()>)> post,
    std::function<bool()> in_this_thread) {
  auto wait = std::make_shared<ManualWait>();
  wait->clock = std::move(clock);
  wait->post = std::move(post);
  wait->in_this_thread = std::move(in_this_thread);
  return wait;
}

ClockTimer::~ClockTimer() {
  cancel();
}

ClockTimer::time_point ClockTimer::manual_now() const {
  return manual_->clock->now();
}

void ClockTimer::manual_expires_at(time_point at) {
  manual_cancel();
  manual_->expiry = at;
}

ClockTimer::time_point ClockTimer::manual_expiry() const {
  return manual_->expiry;
}

void ClockTimer::manual_wait(Handler handler) {
  manual_cancel();
  ManualWait& wait = *manual_;
  wait.handler = std::move(handler);
  const std::uint64_t of = ++wait.generation;
  std::weak_ptr<ManualWait> weak = manual_;
  if (wait.expiry <= wait.clock->now()) {
    wait.post([weak, of] { ManualWait::complete(weak, of); });
    return;
  }
  wait.clock_id = wait.clock->schedule(wait.expiry, [weak, of] { ManualWait::fire(weak, of); });
}

std::size_t ClockTimer::manual_cancel() {
  ManualWait& wait = *manual_;
  ++wait.generation;
  if (!wait.handler) return 0;
  if (wait.clock_id != 0) wait.clock->cancel(wait.clock_id);
  wait.clock_id = 0;
  Handler handler = std::move(wait.handler);
  wait.handler = nullptr;
  wait.post([handler = std::move(handler)] { handler(asio::error::operation_aborted); });
  return 1;
}

}  // namespace polybus
