// SPDX-License-Identifier: Apache-2.0
// OMB's rate controller (benchmark-framework's RateController), for producerRate 0: every
// period, back off when the receive or the publish backlog passed 1,000 messages, else ramp up,
// doubling the ramp each calm period and halving it each backlogged one (between 1% and 100%).
#pragma once

#include <algorithm>
#include <cstdint>

namespace polybus::bench {

class RateController {
 public:
  double next(double rate, double period_s, std::uint64_t published_total,
              std::uint64_t received_total, std::uint64_t published_period,
              std::uint64_t received_period) {
    const double expected = rate * period_s;
    const auto receive_backlog =
        static_cast<double>(published_total) - static_cast<double>(received_total);
    if (receive_backlog > kBacklogLimit) {
      ramp_ = std::max(kMinRamp, ramp_ / 2);
      return std::max(1.0, std::min(static_cast<double>(received_period) / period_s,
                                    std::max(0.0, expected - receive_backlog) / period_s));
    }
    const double publish_backlog = expected - static_cast<double>(published_period);
    if (publish_backlog > kBacklogLimit) {
      ramp_ = std::max(kMinRamp, ramp_ / 2);
      return std::max(1.0, std::min(static_cast<double>(published_period) / period_s,
                                    std::max(0.0, expected - publish_backlog) / period_s));
    }
    ramp_ = std::min(kMaxRamp, ramp_ * 2);
    return rate * (1 + ramp_);
  }

 private:
  static constexpr double kBacklogLimit = 1000, kMinRamp = 0.01, kMaxRamp = 1;
  double ramp_ = kMaxRamp;
};

}  // namespace polybus::bench
