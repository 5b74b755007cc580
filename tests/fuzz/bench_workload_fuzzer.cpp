// SPDX-License-Identifier: Apache-2.0
// OMB workload files (bench/workload.hpp) as `polybus bench --workload` reads them: YAML from the
// caller, through yaml-cpp and the field checks.
// Checks: a file is refused with WorkloadError only; an accepted one has every value inside its
// bounds (at least one topic, and producers or consumers, within the limits).
#include "bench/workload.hpp"
#include "fuzz_util.hpp"

using namespace polybus::bench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  const WorkloadLimits limits;
  try {
    const Workload w = parse_workload(yaml, "fuzz.yaml", limits);
    FUZZ_CHECK(w.topics >= 1 && w.topics <= limits.max_topics);
    FUZZ_CHECK(w.producer_rate <= limits.max_rate);
    FUZZ_CHECK(w.message_size <= limits.max_payload);
    FUZZ_CHECK(w.producers_per_topic > 0 ||
               std::uint64_t{w.subscriptions_per_topic} * w.consumer_per_subscription > 0);
    FUZZ_CHECK(std::uint64_t{w.topics} *
                   (w.producers_per_topic +
                    std::uint64_t{w.subscriptions_per_topic} * w.consumer_per_subscription) <=
               limits.max_clients);
  } catch (const WorkloadError&) {
  }
  return 0;
}
