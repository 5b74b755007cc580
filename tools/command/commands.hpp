// SPDX-License-Identifier: Apache-2.0
// The polybus command's subcommands. Each returns the process exit code (0 ok, 1 failure,
// 2 bad usage via UsageError).
#pragma once

#include <string>
#include <vector>

#include "polybus/polybus.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/reporting.hpp"
#include "polybus/tools/signals.hpp"

namespace polybus::cli {

int run_pub(const Argv& args);
int run_sub(const Argv& args);
int run_request(const Argv& args);
int run_serve(const Argv& args);
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

}  // namespace polybus::cli
