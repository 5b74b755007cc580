// SPDX-License-Identifier: Apache-2.0
// Runs one OMB workload over OMB workers (`polybus bench worker`, or OMB's own Java workers) as
// OMB's coordinator runs it (DistributedWorkersEnsemble with WorkloadGenerator): at least two
// workers, the first half (rounded down) producing and the rest consuming; topics created by the
// first; producers and consumers dealt round-robin; the probe and the wait for every
// subscription to have it; the rate given to each producing worker; OMB's rate controller for
// producerRate 0; the warm-up, the backlog and the test in windows of summed counters and merged
// histograms; the result in OMB's format. A worker that refuses, fails or stops answering ends
// the run within a bound, named by its address and endpoint, and every worker is told
// /stop-all.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/omb_result.hpp"
#include "bench/workload.hpp"

namespace polybus::bench::coordinator {

struct DistributedSettings {
  std::vector<std::string> workers;  // http://HOST:PORT each
  std::string driver_file;           // sent as is to /initialize-driver
  std::string driver;                // the result's "driver": the driver file's name
  std::string url;                   // the polybus URL the driver file names, if it is one
  std::chrono::milliseconds window{10'000};
  // The consumers have the probe within this (OMB: 60 s), or the run fails.
  std::chrono::milliseconds ready_timeout{60'000};
  // Each call to a worker (OMB waits 600 s and then aborts).
  std::chrono::milliseconds call_timeout{60'000};
  std::ostream* histogram_log = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> progress;
};

// Throws std::runtime_error naming the worker and the endpoint when a call fails, after telling
// every worker /stop-all.
OmbResult run_distributed(const Workload& workload, const DistributedSettings& settings);

}  // namespace polybus::bench::coordinator
