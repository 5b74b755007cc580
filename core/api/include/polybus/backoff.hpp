// Reconnect and retry delays, as a small policy shared by every adapter (cf. cppkafka's
// BackoffPerformer, nats.c's custom reconnect delay).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>

namespace polybus {

class ResolvedOptions;

// attempt counts from 1 (the first retry). Returns how long to wait before it.
using BackoffFunction = std::function<std::chrono::milliseconds(std::uint32_t attempt)>;

class Backoff {
 public:
  // min(initial * 2^(attempt-1), max)
  static Backoff exponential(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  // uniform in [0, min(initial * 2^(attempt-1), max)] ("full jitter")
  static Backoff full_jitter(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  // exponential with each delay scaled by a random factor in [1 - fraction, 1 + fraction]
  static Backoff exponential_jitter(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                                    double fraction);
  static Backoff custom(BackoffFunction fn);
  // From the options reconnect_backoff, reconnect_initial and reconnect_max.
  static Backoff from_options(const ResolvedOptions& options);

  std::chrono::milliseconds delay(std::uint32_t attempt) const { return fn_(attempt); }

 private:
  explicit Backoff(BackoffFunction fn) : fn_(std::move(fn)) {}
  BackoffFunction fn_;
};

// Counts attempts; reset after a successful handshake.
class BackoffState {
 public:
  explicit BackoffState(Backoff policy) : policy_(std::move(policy)) {}
  std::chrono::milliseconds next() { return policy_.delay(++attempt_); }
  void reset() { attempt_ = 0; }
  std::uint32_t attempts() const { return attempt_; }
  void set_policy(Backoff policy) { policy_ = std::move(policy); }

 private:
  Backoff policy_;
  std::uint32_t attempt_ = 0;
};

}  // namespace polybus
