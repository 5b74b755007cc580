// SPDX-License-Identifier: Apache-2.0
// `polybus bench`: the benchmark's command front, which the polybus command dispatches to. Each
// returns the process exit code (0 ok, 1 failure, 2 bad usage via UsageError).
#pragma once

#include "polybus/tools/args.hpp"

namespace polybus::cli {

int run_bench(const Argv& args);
// bench --workload FILE.yaml URL...: an OpenMessaging Benchmark workload.
int run_bench_workload(const Argv& args);
// bench merge FILE.hlog...: the percentiles of several HdrHistogram interval logs together.
int run_bench_merge(const Argv& args);
// bench scale URL --topics N: what one client costs per subscription and connection.
int run_bench_scale(const Argv& args);
// bench worker [--listen HOST:PORT]: an OpenMessaging Benchmark worker over polybus.
int run_bench_worker(const Argv& args);

}  // namespace polybus::cli
