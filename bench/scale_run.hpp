// SPDX-License-Identifier: Apache-2.0
// What a client's cost grows with: one client subscribed to N topics (one subscription each), or
// to one topic over N connections (NSQ's lookupd fan-out to N nsqd), measured in this process:
// resident memory per subscription and per connection, CPU per second while idle (heartbeats
// only), time to subscribe to all, and the throughput of messages spread over every topic. The
// broker runs in another process, so that its memory and CPU are not counted.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace polybus::bench {

struct ScaleSettings {
  std::string url;
  std::uint32_t topics = 1;  // subscriptions, one per topic
  // Fan-out: subscribe only to this topic (which the N nsqd behind the URL's lookupd have) and
  // wait until `expect_connections` connections are up.
  std::string fan_out_topic;
  std::uint32_t expect_connections = 0;
  std::chrono::milliseconds idle{10'000};
  std::uint64_t messages = 0;  // spread over the topics after the idle period; 0: none
  std::chrono::milliseconds timeout{300'000};
};

struct ScalePoint {
  std::string scheme;
  std::uint32_t topics = 0;
  // Sockets the subscriptions opened (the client's connection from before them not counted, so
  // 0 where every subscription shares it).
  std::uint64_t connections = 0;
  double base_kib = 0, ready_kib = 0;  // resident set before subscribing and once ready
  double kib_per_subscription = 0, kib_per_connection = 0;
  double subscribe_seconds = 0;
  double idle_cpu_percent = 0;  // of one core, over the idle period
  double idle_seconds = 0;
  std::uint64_t delivered = 0;
  double msgs_per_sec = 0;
};

ScalePoint measure_scale(const ScaleSettings& settings);
std::string to_json(const ScalePoint& point);

// The resident set of this process, in KiB (/proc/self/statm).
double resident_kib();
// The CPU time this process has used so far, user and system, in seconds.
double cpu_seconds();

}  // namespace polybus::bench
