// Internal: the messages nsqd may still count as in flight on one connection, for the check that
// it keeps within RDY. nsqd stops counting a message once it times out (msg_timeout after sending
// it, later if touched) and may then send another in its place. So the plain count of messages
// the client has not finished or requeued overstates nsqd's count, and a "more than RDY in
// flight" check on it would cut a healthy connection whose handler holds messages longer than
// msg_timeout. Here only unanswered messages that arrived recently count: arrivals are kept per
// slice of msg_timeout / 16, and recent() leaves out the slices older than 13/16 of it, so it
// does not overstate nsqd's count unless the client read a message over 3/16 of msg_timeout
// after nsqd sent it (a check against it errs towards accepting).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>

#include "polybus/adapter/adapter.hpp"

namespace polybus::nsq {

class InFlightWindow {
 public:
  void reset(std::chrono::milliseconds msg_timeout) {
    width_ = std::max<Clock::duration>(std::chrono::milliseconds(1), msg_timeout / kSlices);
    counts_.fill(0);
    newest_ = kNone;
  }
  void arrived(Clock::time_point at) {
    const std::int64_t slice = slice_of(at);
    advance(slice);
    if (slice > newest_ - kSlices) ++counts_[index(slice)];
  }
  // A FIN or REQ for a message that arrived at `at` (on this connection).
  void answered(Clock::time_point at) {
    const std::int64_t slice = slice_of(at);
    if (newest_ == kNone || slice > newest_ || slice <= newest_ - kSlices) return;
    auto& count = counts_[index(slice)];
    if (count > 0) --count;
  }
  std::uint64_t recent(Clock::time_point now) {
    advance(slice_of(now));
    std::uint64_t sum = 0;
    for (std::int64_t s = newest_ - kCounted + 1; s <= newest_; ++s) sum += counts_[index(s)];
    return sum;
  }

 private:
  static constexpr std::int64_t kSlices = 16;
  static constexpr std::int64_t kCounted = 13;
  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();

  std::int64_t slice_of(Clock::time_point t) const { return t.time_since_epoch() / width_; }
  static std::size_t index(std::int64_t slice) {
    return static_cast<std::size_t>(((slice % kSlices) + kSlices) % kSlices);
  }
  void advance(std::int64_t slice) {
    if (newest_ == kNone || slice - newest_ >= kSlices) {
      counts_.fill(0);
    } else {
      for (std::int64_t s = newest_ + 1; s <= slice; ++s) counts_[index(s)] = 0;
    }
    if (newest_ == kNone || slice > newest_) newest_ = slice;
  }

  Clock::duration width_ = std::chrono::milliseconds(60000) / kSlices;
  std::array<std::uint64_t, kSlices> counts_{};
  std::int64_t newest_ = kNone;
};

}  // namespace polybus::nsq
