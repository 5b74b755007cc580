// SPDX-License-Identifier: Apache-2.0
// An OpenMessaging Benchmark workload (https://github.com/openmessaging/benchmark, its
// workloads/*.yaml): every field of OMB's Workload, read from its YAML file as OMB reads it, and
// checked before anything connects.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace polybus::bench {

enum class KeyDistributor { no_key, key_round_robin, random_nano };
const char* key_distributor_name(KeyDistributor key);  // as OMB spells it: NO_KEY, ...

struct Workload {
  std::string name;
  std::uint32_t topics = 0;
  std::uint32_t partitions_per_topic = 0;
  KeyDistributor key_distributor = KeyDistributor::no_key;
  std::uint64_t message_size = 0;
  bool use_randomized_payloads = false;
  double random_bytes_ratio = 0;
  std::uint32_t randomized_payload_pool_size = 0;
  std::string payload_file;  // empty: none; else read relative to the working directory
  std::uint32_t subscriptions_per_topic = 0;
  std::uint32_t producers_per_topic = 0;
  std::uint32_t consumer_per_subscription = 0;
  std::uint64_t producer_rate = 0;  // messages per second, all producers; 0: find the highest
  std::uint64_t consumer_backlog_size_gb = 0;
  double backlog_drain_ratio = 1.0;
  std::uint32_t test_duration_minutes = 0;
  std::uint32_t warmup_duration_minutes = 1;

  // Where `polybus bench --duration` and `--warmup` override the minutes, and `--backlog` the
  // gigabytes (a backlog small enough for a short run).
  std::chrono::milliseconds test_duration() const;
  std::chrono::milliseconds warmup_duration() const;
  std::uint64_t consumer_backlog_bytes() const;
  std::chrono::milliseconds test_duration_override{0}, warmup_duration_override{-1};
  std::uint64_t consumer_backlog_bytes_override = 0;
};

// What a workload file may ask for: beyond these, the file is refused.
struct WorkloadLimits {
  std::uint64_t max_payload = 64 << 20;  // bytes: messageSize and the payload file
  std::uint32_t max_topics = 100'000;
  std::uint32_t max_clients = 100'000;   // producers and consumers of every topic together
  std::uint64_t max_rate = 100'000'000;  // messages per second
};

// Reads and checks `path`. Throws WorkloadError naming the file, the field and the value: not
// YAML, an unknown field, a missing required one, a value of the wrong type or out of range, a
// payload file that is missing or larger than max_payload.
struct WorkloadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Workload read_workload(const std::string& path, const WorkloadLimits& limits = {});
Workload parse_workload(const std::string& yaml, const std::string& name,
                        const WorkloadLimits& limits = {});

// The payloads a workload sends: the payload file's bytes (read relative to the working
// directory, as OMB reads it), a pool of randomized ones (randomBytesRatio of each random, the
// rest zeros), or messageSize bytes of filler. Throws std::runtime_error for an unreadable file.
std::vector<std::string> workload_payloads(const Workload& workload);

}  // namespace polybus::bench
