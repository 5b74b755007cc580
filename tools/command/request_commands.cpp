// SPDX-License-Identifier: Apache-2.0
// request and serve.
#include <iostream>

#include "commands.hpp"
#include "polybus/polybus.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/metrics_endpoint.hpp"

namespace polybus::cli {

int run_request(const Argv& argv) {
  Args args(argv, {"timeout"});
  if (args.help()) {
    std::cout << "usage: polybus request URL TOPIC PAYLOAD [--timeout MS]\n"
                 "Prints the reply payload alone on standard output; exits 1 on error.\n"
                 "--timeout defaults to the URL's op_timeout (10 s unless set there).\n";
    return 0;
  }
  const std::string& url = args.positional(0, "URL");
  const std::string& topic = args.positional(1, "TOPIC");
  const std::string& payload = args.positional(2, "PAYLOAD");
  if (args.positional().size() > 3)
    throw UsageError("unexpected argument '" + args.positional()[3] + "'");
  // 0: the client's op_timeout, which the URL may set.
  auto timeout = std::chrono::milliseconds(args.number("timeout", 0, 1, 3'600'000));
  auto client = connect_reporting(url);
  auto reply = client.request_sync(topic, payload, timeout);
  client.close_sync(std::chrono::seconds(5));
  if (reply.ec) {
    std::cerr << "polybus request: " << reply.ec.message()
              << (reply.detail.empty() ? "" : ": " + reply.detail) << "\n";
    return 1;
  }
  std::cout << reply.payload << "\n";
  return 0;
}

int run_serve(const Argv& argv) {
  Args args(argv, {"concurrency", "metrics"});
  if (args.help()) {
    std::cout << "usage: polybus serve URL TOPIC [--concurrency N] [--metrics HOST:PORT]\n"
                 "Answers each request with its own payload until SIGINT or SIGTERM.\n"
                 "--metrics serves the client's metrics at http://HOST:PORT/metrics.\n";
    return 0;
  }
  const std::string& url = args.positional(0, "URL");
  const std::string& topic = args.positional(1, "TOPIC");
  if (args.positional().size() > 2)
    throw UsageError("unexpected argument '" + args.positional()[2] + "'");
  SubscribeOptions options;
  options.concurrency = static_cast<std::uint32_t>(args.number("concurrency", 1, 1, 256));
  options.max_in_flight = options.concurrency;
  block_termination_signals();
  auto client = connect_reporting(url);
  auto sub = client.serve(topic, options, [](Message& m) { return std::string(m.payload()); });
  auto endpoint = metrics_endpoint_if_asked(args, client);
  if (auto ec = sub.wait_ready(std::chrono::seconds(30))) {
    std::cerr << "polybus serve: registration failed: " << ec.message() << "\n";
    return 1;
  }
  std::cerr << "polybus serve: answering '" << topic << "' on " << url << "\n";
  wait_for_termination_signal();
  client.close_sync(std::chrono::seconds(5));
  return 0;
}

}  // namespace polybus::cli
