// SPDX-License-Identifier: Apache-2.0
// One latency measured from any thread: a histogram of the current period (a window) and one of
// everything since the last reset (the run's aggregate), both of one layout.
#pragma once

#include <mutex>

#include "hdr_histogram.hpp"

namespace polybus::bench {

class LatencyRecorder {
 public:
  explicit LatencyRecorder(const HdrHistogram& layout = HdrHistogram::for_latency_us())
      : period_(layout), total_(layout) {
    period_.reset();
    total_.reset();
  }
  void record(std::int64_t micros) {
    std::lock_guard<std::mutex> lock(mutex_);
    period_.record(micros);
    total_.record(micros);
  }
  // The period's histogram; the next period starts empty.
  HdrHistogram take_period() {
    std::lock_guard<std::mutex> lock(mutex_);
    HdrHistogram taken = period_;
    period_.reset();
    return taken;
  }
  HdrHistogram total() {
    std::lock_guard<std::mutex> lock(mutex_);
    return total_;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    period_.reset();
    total_.reset();
  }

 private:
  std::mutex mutex_;
  HdrHistogram period_, total_;
};

}  // namespace polybus::bench
