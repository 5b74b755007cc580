// SPDX-License-Identifier: Apache-2.0
// The result of a workload run in OpenMessaging Benchmark's format: every field of OMB's
// TestResult, in its order and units (publish and end-to-end latency in milliseconds, publish
// delay in microseconds, one entry per window in the series), so that OMB's bin/create_charts.py
// and other readers of OMB results read polybus's. A "polybus" object adds what OMB has no field
// for (the URL, whether the run completed, the workload fields that did not map onto the scheme).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hdr_histogram.hpp"

namespace polybus::bench {

// One latency's percentiles, as the series and the aggregated fields give them.
struct LatencySummary {
  double avg = 0, p50 = 0, p75 = 0, p95 = 0, p99 = 0, p999 = 0, p9999 = 0, max = 0;
};
// From a histogram of microseconds, divided by `divisor` (1000: milliseconds).
LatencySummary summarize(const HdrHistogram& us, double divisor);
// HdrHistogram's percentile iteration (100 ticks per half distance to 100%), keyed by the
// percentile each bucket reaches, as OMB fills its aggregated*Quantiles maps.
std::map<double, double> quantiles(const HdrHistogram& us, double divisor);

struct LatencySeries {
  std::vector<LatencySummary> windows;
};

struct OmbResult {
  std::string workload, driver;
  std::uint64_t message_size = 0;
  std::uint32_t topics = 0, partitions = 0, producers_per_topic = 0, consumers_per_topic = 0;
  std::vector<double> publish_rate, publish_error_rate, consume_rate;
  std::vector<std::int64_t> backlog;
  LatencySeries publish_latency, publish_delay, end_to_end;  // ms, us, ms
  LatencySummary aggregated_publish, aggregated_delay, aggregated_end_to_end;
  std::map<double, double> publish_quantiles, delay_quantiles, end_to_end_quantiles;

  // polybus's own
  std::string url;
  bool complete = true;
  std::string incomplete_because;
  std::vector<std::string> unmapped;  // one sentence per field that did not map
  double window_seconds = 10;
  std::uint64_t published = 0, publish_errors = 0, received = 0;
  std::vector<double> window_start_seconds;
  std::vector<std::string> window_phases;  // "backlog", "drain" or "test" for each window
  // consumerBacklogSizeGB (or bench --backlog): what was asked, and how long the backlog took to
  // build with the consumers paused and to drain once they resumed (-1: it did not).
  std::uint64_t backlog_bytes = 0, backlog_messages = 0;
  double backlog_built_seconds = -1, backlog_drained_seconds = -1;
  std::string first_error;
  // A run over OMB workers: their URLs, the first producing_workers of them producing, and each
  // one's clock against the coordinator's: the offset taken out of its send and receive times,
  // and the estimate's error (half the quickest round trip). Unknown for a worker without
  // polybus's clock endpoint (OMB's own): its clock's difference counts as latency.
  std::vector<std::string> workers;
  std::uint32_t producing_workers = 0;
  struct Clock {
    bool known = false;
    double offset_ms = 0, error_ms = 0;
  };
  std::vector<Clock> clocks;  // one per worker
};

std::string to_json(const OmbResult& result);

}  // namespace polybus::bench
