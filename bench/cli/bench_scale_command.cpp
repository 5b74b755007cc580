// SPDX-License-Identifier: Apache-2.0
// bench scale: one point of how a client's cost grows (bench/scale_run.hpp): N topics with a
// subscription each, or one topic over N connections; bench/scale/measure.sh runs the sweeps.
#include <cstdio>
#include <iostream>

#include "bench/cli/bench_command.hpp"
#include "bench/scale_run.hpp"
#include "polybus/polybus.hpp"
#include "polybus/tools/args.hpp"

namespace polybus::cli {

int run_bench_scale(const Argv& argv) {
  Args args(argv, {"topics", "fan-out", "connections", "idle-seconds", "messages", "timeout"});
  if (args.help()) {
    std::cout
        << "usage: polybus bench scale URL [--topics N] [--idle-seconds S] [--messages M]\n"
           "       polybus bench scale URL --fan-out TOPIC --connections N [--idle-seconds S]\n"
           "One client subscribes to N new topics (default 1), one subscription each, or to\n"
           "TOPIC over the N connections its URL's lookupd names; prints this process's\n"
           "resident memory per subscription and per connection, CPU while idle for S\n"
           "seconds (default 10), the time to subscribe to all, and with --messages the\n"
           "throughput of M messages spread over the topics. Run the broker in another\n"
           "process (polybus broker NAME) so that only the client is measured.\n";
    return 0;
  }
  bench::ScaleSettings s;
  s.url = args.positional(0, "URL");
  s.topics = static_cast<std::uint32_t>(args.number("topics", 1, 1, 100'000));
  if (auto topic = args.value("fan-out")) {
    s.fan_out_topic = *topic;
    s.expect_connections = static_cast<std::uint32_t>(args.number("connections", 1, 1, 100'000));
  } else if (args.has("connections")) {
    throw UsageError("--connections goes with --fan-out");
  }
  s.idle = std::chrono::seconds(args.number("idle-seconds", 10, 1, 3600));
  s.messages = args.number("messages", 0, 0, 100'000'000);
  s.timeout = std::chrono::seconds(args.number("timeout", 300, 1, 86400));
  const bench::ScalePoint p = bench::measure_scale(s);
  std::printf(
      "%s: %u topic(s), %llu connection(s): %.1f KiB per subscription, %.1f KiB per "
      "connection (%.0f -> %.0f KiB resident); subscribed in %.3f s; idle CPU %.3f%% of "
      "a core over %.1f s",
      p.scheme.c_str(), p.topics, static_cast<unsigned long long>(p.connections),
      p.kib_per_subscription, p.kib_per_connection, p.base_kib, p.ready_kib, p.subscribe_seconds,
      p.idle_cpu_percent, p.idle_seconds);
  if (s.messages)
    std::printf("; %.0f msgs/s over the topics (%llu delivered)", p.msgs_per_sec,
                static_cast<unsigned long long>(p.delivered));
  std::printf("\n%s\n", bench::to_json(p).c_str());
  return s.messages && p.delivered < s.messages ? 1 : 0;
}

}  // namespace polybus::cli
