// SPDX-License-Identifier: Apache-2.0
// A timer that waits on the real steady clock or, when it was given one, on a ManualClock: the
// code that waits is the same either way. The client's timers of what a test may want to move
// (backoff, deadlines, batch max_wait, retry delays) and the in-process brokers' (message
// timeouts, deferrals) are these; what keeps a connection alive stays on asio::steady_timer.
#pragma once

#include "polybus/export.hpp"

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <system_error>
#include <utility>

#include "polybus/adapter/clock.hpp"
#include "polybus/manual_clock.hpp"

namespace polybus {

/// As asio::steady_timer, for one wait at a time, on its executor (a strand or an io_context's):
/// expires_at/expires_after cancel a pending wait (its handler gets operation_aborted), cancel()
/// too, and so does destruction. On the real clock it is an asio::steady_timer and costs what
/// one does. On a ManualClock the handler runs on the executor while the clock's advance() waits
/// for it, so that what is done when a time comes is done before advance() returns.
class POLYBUS_API ClockTimer {
 public:
  using time_point = Clock::time_point;                  ///< the steady clock's
  using duration = Clock::duration;                      ///< the steady clock's
  using Handler = std::function<void(std::error_code)>;  ///< on a ManualClock, once per wait

  /// On the real clock when `clock` is null. `executor` runs the handlers.
  template <typename Executor>
  explicit ClockTimer(const Executor& executor, std::shared_ptr<ManualClock> clock = nullptr);
  /// On `io`'s own executor.
  explicit ClockTimer(asio::io_context& io, std::shared_ptr<ManualClock> clock = nullptr)
      : ClockTimer(io.get_executor(), std::move(clock)) {}
  ~ClockTimer();  ///< cancels a pending wait
  ClockTimer(const ClockTimer&) = delete;
  ClockTimer& operator=(const ClockTimer&) = delete;

  /// The time of the clock the timer waits on.
  time_point now() const { return manual_ ? manual_now() : Clock::now(); }
  /// Sets the expiry, cancelling a pending wait.
  void expires_at(time_point at) {
    if (manual_)
      manual_expires_at(at);
    else
      real_.expires_at(at);
  }
  /// Sets the expiry `after` from now(), cancelling a pending wait.
  void expires_after(duration after) { expires_at(now() + after); }
  /// The expiry set last.
  time_point expiry() const { return manual_ ? manual_expiry() : real_.expiry(); }
  /// Calls `handler` with no error once the expiry comes, or with operation_aborted when the
  /// wait is cancelled first. A wait already pending is cancelled.
  template <typename WaitHandler>
  void async_wait(WaitHandler&& handler);
  /// Cancels the pending wait, if any; how many were cancelled (0 or 1).
  std::size_t cancel() { return manual_ ? manual_cancel() : real_.cancel(); }
  /// Whether it waits on a ManualClock.
  bool manual() const { return static_cast<bool>(manual_); }

 private:
  struct ManualWait;
  static std::shared_ptr<ManualWait> make_manual(std::shared_ptr<ManualClock> clock,
                                                 std::function<void(std::function<void()>)> post,
                                                 std::function<bool()> in_this_thread);
  time_point manual_now() const;
  void manual_expires_at(time_point at);
  time_point manual_expiry() const;
  void manual_wait(Handler handler);
  std::size_t manual_cancel();

  asio::steady_timer real_;             // idle on a ManualClock
  std::shared_ptr<ManualWait> manual_;  // only on a ManualClock
};

template <typename Executor>
ClockTimer::ClockTimer(const Executor& executor, std::shared_ptr<ManualClock> clock)
    : real_(executor) {
  if (clock)
    manual_ = make_manual(
        std::move(clock),
        [executor](std::function<void()> fn) { asio::post(executor, std::move(fn)); },
        [executor] { return executor.running_in_this_thread(); });
}

template <typename WaitHandler>
void ClockTimer::async_wait(WaitHandler&& handler) {
  if (manual_)
    manual_wait(Handler(std::forward<WaitHandler>(handler)));
  else
    real_.async_wait(std::forward<WaitHandler>(handler));
}

}  // namespace polybus
