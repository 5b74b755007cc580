// SPDX-License-Identifier: Apache-2.0
// Internal: what the adapter reported about its connections, kept so that an operation that
// fails for want of a connection says why (the endpoint and the OS or server error) instead of
// a bare timeout, and so that a client that never connected fails its operations after
// connect_timeout rather than at their deadlines.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <system_error>

#include "polybus/adapter/adapter.hpp"
#include "polybus/status.hpp"

namespace polybus::detail {

// "<what> not completed within <N>ms": the words of every operation that ran out of time.
std::string not_completed_within(const std::string& what, Clock::duration allowed);

class Connectivity {
 public:
  void set_connect_timeout(std::chrono::milliseconds timeout) { connect_timeout_ = timeout; }
  // The client's clock (ConnectOptions::clock), which a failure's time is taken on; null: the
  // real one. Set before any state change.
  void set_clock(std::shared_ptr<ManualClock> clock) { clock_ = std::move(clock); }

  void on_state(ConnectionState state, const std::string& endpoint, std::error_code reason,
                const std::string& detail,
                std::chrono::milliseconds retry_in = std::chrono::milliseconds(0));

  // When the tracker first looks at an operation issued now: after connect_timeout while the
  // client has never connected, else at its deadline. At once when no connection is up, an
  // attempt failed, and the next one is due only after that: no attempt left can connect in
  // time (whether or not the client was connected before).
  Clock::time_point first_look(Clock::time_point now, Clock::time_point deadline) const;
  // For an operation pending since `started`: no connection is up and the next attempt comes
  // too late for it (after its deadline, or after started + connect_timeout for a client that
  // never connected).
  bool attempts_exhausted(Clock::time_point started, Clock::time_point deadline) const;

  // What an operation (named by `what`) due at `now` completes with. An empty Status before
  // the deadline means: keep waiting until the deadline.
  Status verdict(const std::string& what, Clock::time_point started, Clock::time_point deadline,
                 Clock::time_point now) const;

  // A cause for a failure an adapter reported without one: the operation, and while no
  // connection is up, the last connection's end.
  std::string explain(const std::string& what) const;

  std::size_t connected_count() const;  // endpoints connected now

 private:
  // Under mutex_: when an operation is looked at, and whether no attempt left is in time for it.
  Clock::time_point look_by(Clock::time_point started, Clock::time_point deadline) const;
  bool exhausted(Clock::time_point started, Clock::time_point deadline) const;

  mutable std::mutex mutex_;
  // !up_.empty(), readable without the lock: first_look() of a connected client (every
  // publish's) is its deadline, whatever else is known. A state change after the read is seen
  // by the tracker's recheck, as it was when first_look() took the lock.
  std::atomic<bool> any_up_{false};
  std::chrono::milliseconds connect_timeout_{5000};
  std::set<std::string> up_;          // endpoints connected now
  std::set<std::string> attempting_;  // endpoints whose connection attempt is under way
  bool ever_connected_ = false;
  Status last_failure_;  // the last connection that failed or ended, with its cause
  bool last_failure_connecting_ = false;  // it failed before it was up
  Clock::time_point last_failure_at_{};
  std::shared_ptr<ManualClock> clock_;
  Clock::time_point next_attempt_ = Clock::time_point::max();  // after a failure, the retry
};

}  // namespace polybus::detail
