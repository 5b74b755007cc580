// SPDX-License-Identifier: Apache-2.0
// Runs one OMB workload against one URL as OMB's WorkloadGenerator runs it against one driver:
// the topics, subscriptions, consumers and producers it asks for; a warm-up whose figures are
// thrown away; the test in windows (10 s by default) of rates, backlog and latency histograms;
// producerRate 0 searched by OMB's rate controller; consumerBacklogSizeGB built with the
// consumers paused, then drained. What does not map onto the scheme is said in the result.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <ostream>
#include <string>

#include "omb_result.hpp"
#include "workload.hpp"

namespace polybus::bench {

struct WorkloadRunSettings {
  std::string url;     // what to connect to
  std::string driver;  // the result's "driver": the scheme and where its broker runs
  std::chrono::milliseconds window{10'000};
  std::uint32_t max_in_flight_per_producer = 1000;
  std::chrono::milliseconds subscribe_timeout{60'000};
  std::ostream* histogram_log = nullptr;    // HdrHistogram interval log of the test's windows
  const std::atomic<bool>* stop = nullptr;  // set (Ctrl-C): end now, the result incomplete
  std::function<void(const std::string&)> progress;  // a line per window
};

// The sentences the result's "unmapped" list gives for `workload` on a scheme with these
// capabilities (publish/subscribe or request/reply only, consumer groups or not).
struct SchemeTraits {
  std::string scheme;
  bool pubsub = true, consumer_groups = false, publish_confirmed = true;
};
std::vector<std::string> unmapped_fields(const Workload& workload, const SchemeTraits& traits);

// Throws std::runtime_error when the scheme cannot run the workload at all (a subscription
// refused, no publish and no request/reply) before the test starts; failures during the test
// are counted in the result.
OmbResult run_workload(const Workload& workload, const WorkloadRunSettings& settings);

}  // namespace polybus::bench
