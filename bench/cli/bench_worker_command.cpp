// SPDX-License-Identifier: Apache-2.0
// bench worker: an OpenMessaging Benchmark worker over polybus, for OMB's coordinator (or
// `polybus bench --workload --workers`) to drive over HTTP.
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "bench/cli/bench_command.hpp"
#include "bench/worker/omb_worker.hpp"
#include "bench/worker/worker_http.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/listen_address.hpp"
#include "polybus/tools/signals.hpp"

namespace polybus::cli {

const char* kWorkerUsage = R"(usage: polybus bench worker [--listen HOST:PORT] [--max-body BYTES]
                           [--max-connections N] [--clock-skew-ms MS]
Serves OpenMessaging Benchmark's worker protocol (the 14 endpoints its coordinator calls:
/initialize-driver, /create-topics, ..., /period-stats) at http://HOST:PORT (default
127.0.0.1:8080; port 0 takes a free one), as OMB's Java worker answers them, so that OMB's own
coordinator (bin/benchmark --workers http://HOST:PORT,...) or `polybus bench --workload FILE
--workers URL,...` drives polybus clients from many machines. The driver file OMB sends names
the broker:
  name: polybus-nsq
  driverClass: polybus
  url: nsq://127.0.0.1:4150        a polybus URL every worker reaches
  topicPrefix: polybus-benchmark   topics are PREFIX-<7 digits>-<7 random letters>
  maxInFlightPerProducer: 1000     publishes in flight per producer
  ioThreads: 2                     io threads for the driver's clients
  sendThreads: 2                   threads pacing the producers
  subscribeTimeoutSeconds: 30      /create-consumers fails past it
  closeTimeoutSeconds: 10          /stop-all's deadline for each client's close
  sendTickMicros: 1000             a sending thread wakes at most this often, sending what
                                   fell due meanwhile (0: a wake for each message)
  maxBatch: 100                    messages due together go in one publish_batch (NSQ MPUB)
One driver at a time: /initialize-driver while one runs is refused (500) until /stop-all. A
refused request's reason is printed on standard error. Listens on loopback unless told
otherwise: the protocol has no authentication. Bodies are bounded by --max-body (default
64 MiB: /start-load carries the payloads; four bodies' worth at most are read or handled at
once, a request past that is answered 503) and open connections by --max-connections (default
64); a new connection must send its request within 10 s. Runs until Ctrl-C or SIGTERM.
Beside OMB's endpoints it answers GET /polybus/clock and POST /polybus/clock-offset, with which
`polybus bench --workload --workers` measures each worker's clock against its own and takes the
difference out of end-to-end latency; --clock-skew-ms pretends this machine's clock is that far
off, to see the correction work.
)";

int run_bench_worker(const Argv& argv) {
  Args args(argv, {"listen", "max-body", "max-connections", "clock-skew-ms"});
  if (args.help()) {
    std::cout << kWorkerUsage;
    return 0;
  }
  if (!args.positional().empty())
    throw UsageError("bench worker takes no URL: the driver file names it");
  const auto endpoint =
      listen_endpoint("--listen", args.value("listen").value_or("127.0.0.1:8080"));
  bench::worker::HttpLimits limits;
  limits.max_body = args.number("max-body", limits.max_body, 1024, std::uint64_t{1} << 32);
  limits.max_connections = args.number("max-connections", limits.max_connections, 1, 10'000);
  limits.max_pending_bytes = 4 * limits.max_body;
  block_termination_signals();
  std::mutex log_mutex;
  auto log = [&log_mutex](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::cerr << "worker: " << line << std::endl;
  };
  std::chrono::milliseconds skew{0};
  if (auto given = args.value("clock-skew-ms")) {
    try {
      std::size_t used = 0;
      skew = std::chrono::milliseconds(std::stoll(*given, &used));
      if (used != given->size() || std::abs(skew.count()) > 86'400'000)
        throw std::invalid_argument("skew");
    } catch (const std::exception&) {
      throw UsageError("--clock-skew-ms wants milliseconds within a day, got '" + *given + "'");
    }
  }
  // Outlives the server, which calls it.
  bench::worker::OmbWorker worker({}, log, skew);
  std::unique_ptr<bench::worker::WorkerHttp> http;
  try {
    http = std::make_unique<bench::worker::WorkerHttp>(
        endpoint,
        [&worker](std::string_view method, std::string_view path, std::string_view body) {
          const auto answer = worker.handle(method, path, body);
          return bench::worker::HttpAnswer{answer.status, answer.body};
        },
        limits);
  } catch (const std::system_error& e) {
    std::cerr << "cannot listen on " << endpoint_text(endpoint) << ": " << e.code().message()
              << std::endl;
    return 1;
  }
  std::cout << "worker: http://" << endpoint_text(http->local_endpoint()) << std::endl;
  wait_for_termination_signal();
  http.reset();
  return 0;
}

}  // namespace polybus::cli
