// SPDX-License-Identifier: Apache-2.0
// What an OMB worker counts and measures, and the three bodies the coordinator reads of it:
// /period-stats (counters and histograms since the previous read, which resets them, and the
// totals since /stop-all), /cumulative-latencies (histograms since /reset-stats, reset by the
// read) and /counters-stats (the totals, read without resetting). Latencies in microseconds, in
// the ranges OMB's coordinator adds the workers' histograms into: publish and publish delay up
// to 60 s (clamped there, as OMB's worker clamps), end to end up to 12 h.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "bench/hdr_histogram.hpp"

namespace polybus::bench::worker {

// Thread-safe. One lock around everything, so that a read sees each message in its counters and
// its histograms alike (a message counted in one period has its latency in the same period).
class WorkerStats {
 public:
  WorkerStats();

  // A message sent and confirmed, `bytes` of payload; the probe counts in the total only.
  void sent(std::size_t bytes, std::int64_t publish_latency_us);
  void probe_sent();
  void send_failed();
  void send_delayed(std::int64_t delay_us);
  // A message received, with its end-to-end latency when it carried its send time.
  void received(std::size_t bytes, std::optional<std::int64_t> end_to_end_us);

  std::string take_period_stats();
  std::string take_cumulative_latencies();
  std::string counters_stats();

  // /reset-stats: the latencies only, counters untouched.
  void reset_latencies();
  // /stop-all: everything but the total of send errors.
  void reset_for_stop();

 private:
  struct Latency {
    explicit Latency(const HdrHistogram& layout) : period(layout), cumulative(layout) {}
    void record(std::int64_t us) {
      period.record(us);
      cumulative.record(us);
    }
    void reset() {
      period.reset();
      cumulative.reset();
    }
    HdrHistogram period, cumulative;
  };
  std::mutex mutex_;
  std::uint64_t sent_ = 0, send_errors_ = 0, bytes_sent_ = 0, received_ = 0, bytes_received_ = 0;
  std::uint64_t total_sent_ = 0, total_send_errors_ = 0, total_received_ = 0;
  Latency publish_latency_, publish_delay_, end_to_end_;
};

}  // namespace polybus::bench::worker
