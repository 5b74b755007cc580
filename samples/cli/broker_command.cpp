// broker: run one of the in-process test brokers until interrupted and print its URL, so that
// `polybus bench`, other processes or other clients can use it (an integration-test harness
// outside the test suite).
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "polybus/testing.hpp"

namespace polybus::cli {

int run_broker(const Argv& argv) {
  Args args(argv, {}, {"tuned-for-tests"});
  if (args.help()) {
    std::cout << "usage: polybus broker NAME [--tuned-for-tests]\nRuns the in-process broker NAME "
                 "until interrupted; prints its URL on the first line, plain (the client's "
                 "defaults), or with --tuned-for-tests the options the test suite uses (short "
                 "timeouts and backoff, e.g. a 1 s NSQ message timeout). NAME is one of:";
    for (const auto& factory : testing::test_brokers()) std::cout << " " << factory.name;
    std::cout << "\n";
    return 0;
  }
  const std::string name = args.positional(0, "NAME");
  if (args.positional().size() > 1)
    throw UsageError("unexpected argument '" + args.positional()[1] + "'");
  block_termination_signals();
  for (const auto& factory : testing::test_brokers()) {
    if (factory.name != name) continue;
    auto broker = factory.start();
    std::string url = broker->url();
    // The test tuning (1 s redelivery, 10 ms reconnects...) only when asked for: a URL copied
    // into an application must not carry it unknowingly.
    if (!args.has("tuned-for-tests")) url = url.substr(0, url.find('?'));
    std::cout << url << std::endl;
    wait_for_termination_signal();
    return 0;
  }
  std::string known;
  for (const auto& factory : testing::test_brokers()) known += " " + factory.name;
  throw UsageError("no in-process broker '" + name + "'; known:" + known);
}

}  // namespace polybus::cli
