// SPDX-License-Identifier: Apache-2.0
// One benchmark run against one URL: the workload of `polybus bench`, measured, not printed.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "polybus/client.hpp"

namespace polybus::cli {

struct BenchSettings {
  std::string url, topic;
  std::uint64_t messages = 100000, size = 200, publishers = 1, subscribers = 1, window = 1000,
                batch = 1, concurrency = 0;
  std::uint64_t batch_consume = 0;  // subscribe_batch in batches of this many; 0: one at a time
  std::chrono::milliseconds batch_wait{100};
  // Around every handler, outermost first: pass (a step of one's own that calls next), timeout,
  // throttle (at a rate never reached), circuit_breaker, deduplicate; for what each costs.
  std::vector<std::string> middleware;
  double rate = 0;  // messages per second offered, all publishers together; 0: as fast as possible
  std::chrono::seconds timeout{600};
  std::optional<std::string> group;
  std::optional<std::uint64_t> from;
  bool progress = false;  // a line per second on standard error while it runs
  bool requests = false;  // round trips (request/serve) on a scheme that also publishes
  // Payloads carry a send time and each receipt (or completion) is timed; false: neither, the
  // work of a bench that measures no latency (figg-bench, bench_writer).
  bool latency = true;
};

// What one run measures: deliveries (pubsub, consume), publish completions (publish) or round
// trips (request).
enum class BenchMode { pubsub, publish, consume, request };
const char* mode_name(BenchMode mode);

struct BenchResult {
  std::string scheme;
  BenchMode mode = BenchMode::pubsub;
  bool publish_confirmed = false;  // a completed publish is broker-confirmed (else only written)
  std::uint64_t measured = 0;      // what the rate counts: deliveries, completions or round trips
  std::uint64_t published = 0, delivered = 0, failures = 0, allocations = 0;
  bool timed_out = false;
  std::string first_failure;  // what the first failed publish or request said
  double seconds = 0, publish_seconds = 0, msgs_per_sec = 0, mb_per_sec = 0, cpu_seconds = 0,
         cpu_us_per_msg = 0, allocs_per_msg = 0;
  const char* latency_kind = "";
  std::uint64_t latency_samples = 0;
  // (percentile, microseconds) for 50, 90, 99, 99.9, 99.99 and 100 (the largest).
  std::vector<std::pair<double, std::uint64_t>> latency_us;
  std::uint64_t latency_at(double percentile) const;
};

// The clients of the runs so far, for --metrics (which reads them while a run adds more).
struct BenchClients {
  std::mutex mutex;
  std::vector<Client> all;
};

// Throws UsageError when the workload does not fit the scheme (--batch without batch publish,
// ...), std::runtime_error when a subscription fails.
BenchResult run_bench_once(const BenchSettings& settings, BenchClients& clients);

}  // namespace polybus::cli
