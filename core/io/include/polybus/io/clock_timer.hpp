// SPDX-License-Identifier: Apache-2.0
// A timer of an in-process broker that waits on the real steady clock or, when the broker was
// given one, on a ManualClock: the broker's code is the same either way.
#pragma once

#include "polybus/export.hpp"

#include <asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <system_error>

#include "polybus/io/manual_clock.hpp"

namespace polybus::io {

/// As asio::steady_timer, for one wait at a time, on `io`'s thread: expires_at/expires_after
/// cancel a pending wait (its handler gets asio::error::operation_aborted), cancel() too, and so
/// does destruction. On a ManualClock the handler runs on `io`'s thread while the clock's
/// advance() waits for it, so that what a broker does when a time comes is done before advance()
/// returns.
class POLYBUS_API ClockTimer {
 public:
  using time_point = std::chrono::steady_clock::time_point;  ///< the steady clock's
  using duration = std::chrono::steady_clock::duration;      ///< the steady clock's
  using Handler = std::function<void(std::error_code)>;      ///< called once per wait

  /// On the real clock when `clock` is null.
  explicit ClockTimer(asio::io_context& io, std::shared_ptr<ManualClock> clock = nullptr);
  ~ClockTimer();  ///< cancels a pending wait
  ClockTimer(const ClockTimer&) = delete;
  ClockTimer& operator=(const ClockTimer&) = delete;

  /// The time of the clock the timer waits on.
  time_point now() const;
  /// Sets the expiry, cancelling a pending wait.
  void expires_at(time_point at);
  /// Sets the expiry `after` from now(), cancelling a pending wait.
  void expires_after(duration after) { expires_at(now() + after); }
  /// The expiry set last.
  time_point expiry() const;
  /// Calls `handler` with no error once the expiry comes, or with operation_aborted when the
  /// wait is cancelled first. A wait already pending is cancelled.
  void async_wait(Handler handler);
  /// Cancels the pending wait, if any; how many were cancelled (0 or 1).
  std::size_t cancel();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace polybus::io
