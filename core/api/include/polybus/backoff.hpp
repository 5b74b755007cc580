// SPDX-License-Identifier: Apache-2.0
// Reconnect and retry delays, as a small policy shared by every adapter (cf. cppkafka's
// BackoffPerformer, nats.c's custom reconnect delay).
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>

namespace polybus {

class ResolvedOptions;

/// A delay policy as a function: `attempt` counts from 1 (the first retry), and the result is how
/// long to wait before it.
using BackoffFunction = std::function<std::chrono::milliseconds(std::uint32_t attempt)>;

/// How long to wait before each retry of a connection. Give one to
/// ConnectOptions::reconnect_backoff to replace the reconnect_* options.
class POLYBUS_API Backoff {
 public:
  /// `min(initial * 2^(attempt-1), max)`.
  static Backoff exponential(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  /// Uniform in `[0, min(initial * 2^(attempt-1), max)]` ("full jitter").
  static Backoff full_jitter(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  /// Exponential with each delay scaled by a random factor in `[1 - fraction, 1 + fraction]`,
  /// and still at most `max`.
  static Backoff exponential_jitter(std::chrono::milliseconds initial,
                                    std::chrono::milliseconds max, double fraction);
  /// Your own delays: `fn` is called with each attempt number.
  static Backoff custom(BackoffFunction fn);
  /// From the options reconnect_backoff, reconnect_initial and reconnect_max (exponential_jitter
  /// there scales by up to 20% either way).
  static Backoff from_options(const ResolvedOptions& options);

  /// How long to wait before retry number `attempt` (counting from 1).
  std::chrono::milliseconds delay(std::uint32_t attempt) const { return fn_(attempt); }

 private:
  explicit Backoff(BackoffFunction fn) : fn_(std::move(fn)) {}
  BackoffFunction fn_;
};

/// A policy and the attempts made so far, for a reconnect loop; reset after a successful
/// handshake.
class POLYBUS_API BackoffState {
 public:
  /// Starts with no attempt counted.
  explicit BackoffState(Backoff policy) : policy_(std::move(policy)) {}
  /// Counts one more attempt and returns the delay before it.
  std::chrono::milliseconds next() { return policy_.delay(++attempt_); }
  /// Back to no attempt counted: the next delay is the first one again.
  void reset() { attempt_ = 0; }
  /// Attempts counted since the last reset().
  std::uint32_t attempts() const { return attempt_; }
  /// Replaces the policy; the attempts counted so far stay.
  void set_policy(Backoff policy) { policy_ = std::move(policy); }

 private:
  Backoff policy_;
  std::uint32_t attempt_ = 0;
};

}  // namespace polybus
