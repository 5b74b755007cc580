// SPDX-License-Identifier: Apache-2.0
// polybus: publish, subscribe, request, serve, benchmark and demo over any registered scheme.
#include <iostream>

#include "bench/cli/bench_command.hpp"
#include "commands.hpp"
#include "polybus/all.hpp"
#include "polybus/register_all_test_brokers.hpp"
#include "polybus/tools/args.hpp"

namespace {

const char* kUsage = R"(usage: polybus COMMAND [ARGS] [--help]
       polybus --version           the library's version and ABI

commands:
  pub URL TOPIC [MSG...]      publish MSGs, or stdin lines, or --count N --size B generated ones
  sub URL TOPIC               print payloads, one per line [--group G] [--count N] [--from OFFSET]
  request URL TOPIC PAYLOAD   print the reply payload
  serve URL TOPIC             answer requests with their own payload (echo) until interrupted
  bench URL                   --topic T --messages N --size B [--publishers P] [--subscribers S]
  demo                        round-trip messages over every scheme on in-process brokers
  broker NAME                 run an in-process broker (mem, nsq, figg, memodb+tcp...) and print its URL
  proxy LISTEN UPSTREAM       a TCP proxy with faults (latency, bandwidth, resets, blackhole...) for tests
  schemes                     list registered schemes, their capabilities and options

URL examples: mem://demo  nsq://127.0.0.1:4150  figg://127.0.0.1:8119  memodb+tcp://127.0.0.1:12703
Options go in the URL query: nsq://127.0.0.1:4150?max_in_flight=100&op_timeout=5s
)";

int run_schemes() {
  for (const auto& name : polybus::registered_schemes()) {
    const auto info = polybus::describe_scheme(name);
    if (!info) continue;  // unregistered since the list was made
    std::cout << "## " << name << "://  " << info->summary << "\n\ncapabilities:";
    for (auto [cap, on] : info->capabilities.list())
      if (on) std::cout << " " << cap;
    std::cout << "\n\n" << info->options.describe() << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    // The library's, which a shared build may take from another release than the headers'.
    std::cout << "polybus " << polybus::version() << " (ABI " << polybus::abi_version() << ")\n";
    return 0;
  }
  std::string command = argv[1];
  polybus::cli::Argv args(argv + 2, argv + argc);
  try {
    if (command == "pub") return polybus::cli::run_pub(args);
    if (command == "sub") return polybus::cli::run_sub(args);
    if (command == "request") return polybus::cli::run_request(args);
    if (command == "serve") return polybus::cli::run_serve(args);
    if (command == "bench") return polybus::cli::run_bench(args);
    if (command == "demo") return polybus::cli::run_demo(args);
    if (command == "broker") return polybus::cli::run_broker(args);
    if (command == "proxy") return polybus::cli::run_proxy(args);
    if (command == "schemes") return run_schemes();
    throw polybus::cli::UsageError("unknown command '" + command + "'");
  } catch (const polybus::cli::UsageError& e) {
    std::cerr << "polybus " << command << ": " << e.what() << "\n(polybus "
              << (command.empty() ? "" : command + " ") << "--help for usage)\n";
    return 2;
  } catch (const polybus::Error& e) {
    std::cerr << "polybus " << command << ": " << e.what() << "\n";
    return e.code() == polybus::errc::invalid_url || e.code() == polybus::errc::invalid_option ||
                   e.code() == polybus::errc::unknown_scheme
               ? 2
               : 1;
  } catch (const std::exception& e) {
    std::cerr << "polybus " << command << ": " << e.what() << "\n";
    return 1;
  }
}
