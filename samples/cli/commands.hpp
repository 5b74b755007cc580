// SPDX-License-Identifier: Apache-2.0
// The polybus command's subcommands. Each returns the process exit code (0 ok, 1 failure,
// 2 bad usage via UsageError).
#pragma once

#include <string>
#include <vector>

#include "polybus/polybus.hpp"

namespace polybus::cli {

using Argv = std::vector<std::string>;

int run_pub(const Argv& args);
int run_sub(const Argv& args);
int run_request(const Argv& args);
int run_serve(const Argv& args);
int run_bench(const Argv& args);
// bench --workload FILE.yaml URL...: an OpenMessaging Benchmark workload.
int run_bench_workload(const Argv& args);
// bench merge FILE.hlog...: the percentiles of several HdrHistogram interval logs together.
int run_bench_merge(const Argv& args);
// bench scale URL --topics N: what one client costs per subscription and connection.
int run_bench_scale(const Argv& args);
int run_demo(const Argv& args);
int run_broker(const Argv& args);
// broker nsqd: the in-process nsqd with nsqd's command line.
int run_nsqd(const Argv& args);
int run_nsqlookupd(const Argv& args);
// broker nsq+lookupd --nsqd N --topic T: an nsqlookupd on `port` (0: a free one) with N nsqd
// registered, each holding topic T; prints the nsq+lookupd URL and runs until interrupted.
int run_lookupd_fan_out(std::uint32_t nsqd_count, const std::string& topic, std::uint16_t port);
int run_figg_server(const Argv& args);
int run_memodb_broker(const Argv& args);
int run_proxy(const Argv& args);

// Connects with the client's warnings and errors (why a connection failed or closed, a limit
// that was hit) written to standard error, so a failure names its cause.
Client connect_reporting(const std::string& url);

// Payload i of a generated run: its sequence number, then printable filler up to size bytes.
std::string generated_payload(std::uint64_t i, std::size_t size);

// Call before connecting (threads inherit the mask), then wait: a clean close on Ctrl-C.
void block_termination_signals();
void wait_for_termination_signal();

}  // namespace polybus::cli
