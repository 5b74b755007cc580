// SPDX-License-Identifier: Apache-2.0
// Reconnecting, the same way in every adapter.
//
// Reconnector paces one retry loop with the client's backoff policy. ReconnectLoop is one
// connection's whole loop on top of it, and the one place that decides, for every protocol:
// - what the application hears: connecting, connected, disconnected with its cause, then
//   reconnecting with the wait before the next attempt (StateEvent::retry_in);
// - what counts as a reconnect (Stats::reconnects): a connection that was up and ended while the
//   client was open. A refused attempt is not one;
// - when the backoff starts over: once the connection has proven itself (a frame the protocol
//   accepted), not when TCP connects, so a server that accepts and then breaks the protocol is
//   paced like one that refuses;
// - how fast server-ordered moves are followed: at once while they are few, then at the
//   backoff's pace, which a connection that proves itself does not reset while moves go on, so a
//   server that moves the client to itself forever costs little.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <system_error>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/backoff.hpp"
#include "polybus/events.hpp"

namespace polybus {

// Retry delays for one loop: wait per the backoff policy, start over after a success. The waits
// are on `clock` (the client's ConnectOptions::clock) when there is one.
class POLYBUS_API Reconnector {
 public:
  Reconnector(const Strand& strand, Backoff policy, std::shared_ptr<ManualClock> clock = nullptr)
      : timer_(strand, std::move(clock)), state_(std::move(policy)) {}
  // Runs attempt after the next backoff delay (replacing a scheduled one); returns the delay.
  std::chrono::milliseconds schedule(std::function<void()> attempt);
  void succeeded() { state_.reset(); }
  void cancel() { timer_.cancel(); }
  std::uint32_t attempts() const { return state_.attempts(); }
  // The time of the clock the waits are on.
  Clock::time_point now() const { return timer_.now(); }

 private:
  ClockTimer timer_;
  BackoffState state_;
};

class POLYBUS_API ReconnectLoop {
 public:
  // Where the loop's state events and reconnect counts go.
  struct Reports {
    std::function<void(const StateEvent&)> state;
    std::function<void()> reconnected;  // a connection that was up ended; another is tried
  };

  // clock: what the backoff waits on (null: the real clock).
  ReconnectLoop(const Strand& strand, Backoff policy, std::string endpoint, Reports reports,
                std::shared_ptr<ManualClock> clock = nullptr);
  // An adapter's loop: the client's backoff policy and clock, its state events and its
  // statistics.
  ReconnectLoop(const AdapterContext& context, std::string endpoint);
  // The same, sharing the context (cheap for one loop per connection of many).
  ReconnectLoop(std::shared_ptr<const AdapterContext> context, std::string endpoint);

  // The endpoint the events name (a move changes it).
  void set_endpoint(std::string endpoint) { endpoint_ = std::move(endpoint); }
  const std::string& endpoint() const { return endpoint_; }

  // An attempt begins: connecting.
  void attempting();
  // The connection is up (the protocol's handshake is done where it has one): connected.
  void connected();
  // The connection works (the server sent a frame the protocol accepted): the backoff starts
  // over. Cheap to call for every frame.
  void proven() {
    if (up_ && !proven_) {
      proven_ = true;
      if (!moves_going_on(retries_.now())) retries_.succeeded();
    }
  }
  bool up() const { return up_; }

  // The connection, or the attempt, ended: disconnected with its cause; a reconnect is counted
  // when a connection that was up ended. Nothing is scheduled.
  void ended(std::error_code reason, const std::string& detail);
  // The client let this connection go for good (discovery no longer lists it): disconnected,
  // not counted as a reconnect, nothing scheduled.
  void retired(std::error_code reason, const std::string& detail);
  // The client closed this connection: closed, nothing scheduled.
  void closed();
  // The next attempt runs after the policy's delay: reconnecting, with that delay. Replaces an
  // attempt already scheduled. Returns the delay.
  std::chrono::milliseconds retry(std::error_code reason, const std::string& detail,
                                  std::function<void()> attempt);
  // The next attempt runs at once, outside the backoff (a move to another address, a fallback
  // to another carrier): reconnecting in 0ms.
  void retry_now(std::error_code reason, const std::string& detail, std::function<void()> attempt);
  // The transport retries by itself (NNG's dialer): reconnecting, with the soonest it may.
  void retried_by_transport(std::error_code reason, const std::string& detail,
                            std::chrono::milliseconds retry_in);
  // ended(), then retry(): the common case.
  std::chrono::milliseconds lost(std::error_code reason, const std::string& detail,
                                 std::function<void()> attempt);
  // The server ordered a move (QuickIO's /qio/move). Returns whether it may be followed at once
  // (retry_now()): the first kMovesAtOnce of a run of moves, each within kMoveWindow of the one
  // before. Past that it is a loop: each move waits the backoff (retry()), and no connection
  // resets the backoff by proving itself until kMoveWindow passes without a move.
  static constexpr std::uint32_t kMovesAtOnce = 3;
  static constexpr std::chrono::milliseconds kMoveWindow{10000};
  bool move();
  // Moves in the current run (for the words that say a loop is paced).
  std::uint32_t recent_moves() const { return moves_in_run_; }
  // A scheduled attempt is dropped (close, or the owner connects by other means).
  void cancel() { retries_.cancel(); }
  std::uint32_t attempts() const { return retries_.attempts(); }

 private:
  void report(ConnectionState state, std::error_code reason = {}, const std::string& detail = {},
              std::chrono::milliseconds retry_in = std::chrono::milliseconds(0)) const;
  bool moves_going_on(Clock::time_point now) const {
    return moves_in_run_ > 0 && now - last_move_ < kMoveWindow;
  }

  Strand strand_;
  Reconnector retries_;
  std::string endpoint_;
  Reports reports_;
  bool up_ = false;
  bool proven_ = false;
  Clock::time_point last_move_;
  std::uint32_t moves_in_run_ = 0;
};

}  // namespace polybus
