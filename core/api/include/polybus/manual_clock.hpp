// SPDX-License-Identifier: Apache-2.0
// Time a test controls. An in-process broker given a ManualClock runs what is due at a time (a
// message timeout, a REQ delay, a deferred publish, a job timeout), and a client given one
// (ConnectOptions::clock) what it waits for (its reconnect backoff, operation deadlines, batch
// max_wait, retry delays), only when the test advances the clock: a 60 s redelivery or a 60 s
// reconnect backoff is tested in milliseconds. What keeps connections alive (heartbeats, pings,
// connect and handshake timeouts) stays on the real clock. Kafka's MockTime and tokio's paused
// time are the same idea.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace polybus {

/// A steady clock that moves only when advanced. Safe from any thread. Share one between brokers
/// and clients to move them together.
class POLYBUS_API ManualClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;  ///< comparable with the real one
  using duration = std::chrono::steady_clock::duration;      ///< as the real one's

  /// Starts at `start`: by default the real steady clock's now, so that times taken from either
  /// are comparable until the clock is advanced.
  explicit ManualClock(time_point start = std::chrono::steady_clock::now());
  ~ManualClock();  ///< drops what is still scheduled, without running it
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  /// The clock's time.
  time_point now() const;

  /// Moves the time forward by `by` and, before returning, runs everything that comes due, in
  /// order of due time (ties in the order they were scheduled), with now() at each one's due
  /// time; what they schedule within the span runs too. Advances from several threads take
  /// turns. Throws std::logic_error when called from inside a callback of this clock. Each
  /// timer's handler runs on its own strand or io thread while advance() waits for it: advance
  /// from a thread of the test's, not from a client's completion or a broker's handler.
  void advance(duration by);
  /// The same, up to `to`; a time already passed runs only what is due.
  void advance_to(time_point to);

  /// Has `fire` run on the thread that advances the clock to `due` or past it; never from
  /// schedule() itself, so one already due runs at the next advance (advance(0) included).
  /// The number is for cancel().
  std::uint64_t schedule(time_point due, std::function<void()> fire);
  /// False when `id` already ran, was cancelled or never was. A callback that is running
  /// finishes.
  bool cancel(std::uint64_t id);
  /// Callbacks scheduled and not yet run.
  std::size_t pending() const;
  /// The earliest due time scheduled, or time_point::max() when none is.
  time_point next_due() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace polybus
