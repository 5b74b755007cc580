// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/clock_timer.hpp"

#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <future>
#include <optional>
#include <stdexcept>

namespace polybus::io {

namespace {

// How long ManualClock::advance waits for a broker's io thread to run a handler that came due:
// a failure bound, for an io_context nobody runs any more.
constexpr std::chrono::seconds kHandlerBound{30};

// The wait on a ManualClock, touched on the io thread only; the clock's callback holds it weakly
// and hands the completion to the io thread.
struct ManualWait {
  explicit ManualWait(asio::io_context& io) : io(io) {}
  asio::io_context& io;
  ClockTimer::time_point expiry{};
  ClockTimer::Handler handler;   // the pending wait's
  std::uint64_t generation = 0;  // of the pending wait, so a stale completion is ignored
  std::uint64_t clock_id = 0;    // its callback on the clock; 0: none

  // On the io thread: runs the pending wait's handler if it is still wait `of`.
  static void complete(const std::weak_ptr<ManualWait>& weak, std::uint64_t of) {
    const auto self = weak.lock();
    if (!self || self->generation != of || !self->handler) return;
    ClockTimer::Handler handler = std::move(self->handler);
    self->handler = nullptr;
    self->clock_id = 0;
    handler(std::error_code{});
  }

  // On the thread that advances the clock: hands wait `of` to the io thread and returns once it
  // ran there (or was dropped with its io_context), so advance() returns after what came due.
  static void fire(const std::weak_ptr<ManualWait>& weak, std::uint64_t of) {
    const auto self = weak.lock();
    if (!self) return;
    asio::io_context& io = self->io;
    if (io.get_executor().running_in_this_thread()) return complete(weak, of);
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::shared_ptr<void> signal(nullptr, [done](void*) { done->set_value(); });
    asio::post(io, [weak, of, signal] { complete(weak, of); });
    signal.reset();
    if (finished.wait_for(kHandlerBound) != std::future_status::ready)
      throw std::runtime_error(
          "ManualClock: a timer's io_context did not run the handler that came due");
  }
};

}  // namespace

struct ClockTimer::State {
  State(asio::io_context& io, std::shared_ptr<ManualClock> clock)
      : io(io), clock(std::move(clock)) {
    if (this->clock)
      manual = std::make_shared<ManualWait>(io);
    else
      real.emplace(io);
  }
  asio::io_context& io;
  std::shared_ptr<ManualClock> clock;
  std::optional<asio::steady_timer> real;  // without a ManualClock
  std::shared_ptr<ManualWait> manual;      // with one
};

ClockTimer::ClockTimer(asio::io_context& io, std::shared_ptr<ManualClock> clock)
    : state_(std::make_unique<State>(io, std::move(clock))) {}

ClockTimer::~ClockTimer() {
  cancel();
}

ClockTimer::time_point ClockTimer::now() const {
  return state_->clock ? state_->clock->now() : std::chrono::steady_clock::now();
}

void ClockTimer::expires_at(time_point at) {
  if (state_->real) {
    state_->real->expires_at(at);
    return;
  }
  cancel();
  state_->manual->expiry = at;
}

ClockTimer::time_point ClockTimer::expiry() const {
  return state_->real ? state_->real->expiry() : state_->manual->expiry;
}

void ClockTimer::async_wait(Handler handler) {
  if (state_->real) {
    state_->real->async_wait(std::move(handler));
    return;
  }
  cancel();
  ManualWait& wait = *state_->manual;
  wait.handler = std::move(handler);
  const std::uint64_t of = ++wait.generation;
  std::weak_ptr<ManualWait> weak = state_->manual;
  if (wait.expiry <= state_->clock->now()) {
    asio::post(state_->io, [weak, of] { ManualWait::complete(weak, of); });
    return;
  }
  wait.clock_id = state_->clock->schedule(wait.expiry, [weak, of] { ManualWait::fire(weak, of); });
}

std::size_t ClockTimer::cancel() {
  if (state_->real) return state_->real->cancel();
  ManualWait& wait = *state_->manual;
  ++wait.generation;
  if (!wait.handler) return 0;
  if (wait.clock_id != 0) state_->clock->cancel(wait.clock_id);
  wait.clock_id = 0;
  Handler handler = std::move(wait.handler);
  wait.handler = nullptr;
  asio::post(state_->io,
             [handler = std::move(handler)] { handler(asio::error::operation_aborted); });
  return 1;
}

}  // namespace polybus::io
