// SPDX-License-Identifier: Apache-2.0
// broker: run one of the in-process test brokers until interrupted and print its URL, so that
// `polybus bench`, other processes or other clients can use it (an integration-test harness
// outside the test suite).
#include <iostream>
#include <stdexcept>

#include "commands.hpp"
#include "polybus/broker_admin.hpp"
#include "polybus/testing.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/listen_address.hpp"
#include "polybus/tools/metrics_endpoint.hpp"

namespace polybus::cli {

int run_broker(const Argv& argv) {
  // The real servers' own command lines, not this command's flags.
  if (!argv.empty()) {
    const Argv rest(argv.begin() + 1, argv.end());
    if (argv[0] == "nsqd") return run_nsqd(rest);
    if (argv[0] == "nsqlookupd") return run_nsqlookupd(rest);
    if (argv[0] == "figg-server") return run_figg_server(rest);
    if (argv[0] == "memodb-broker") return run_memodb_broker(rest);
  }
  Args args(argv, {"port", "metrics", "nsqd", "topic", "fault", "journal", "admin-address"},
            {"tuned-for-tests", "manual-clock"});
  if (args.help()) {
    std::cout << "usage: polybus broker NAME [--port P] [--tuned-for-tests] [--metrics HOST:PORT]\n"
                 "       [--fault RULE]... [--journal FILE] [--admin-address HOST:PORT] "
                 "[--manual-clock]\n"
                 "Runs the in-process broker NAME until interrupted; prints its URL on the first "
                 "line, plain (the client's defaults), or with --tuned-for-tests the options the "
                 "test suite uses (short timeouts and backoff, e.g. a 1 s NSQ message timeout). It "
                 "listens on 127.0.0.1, on port P (the URL's port; for nsq+lookupd the "
                 "nsqlookupd's) or a free one. --metrics serves what the broker carried at "
                 "http://HOST:PORT/metrics (Prometheus text format; docs/metrics.md): "
                 "connections, bytes, and per topic and group the messages published, delivered, "
                 "acked, queued and in flight. nsq+lookupd takes --nsqd N (N nsqd registered "
                 "with the nsqlookupd, default 1) and --topic T (created on every nsqd, so that "
                 "a consumer of T connects to all N: a lookupd fan-out). --fault adds a fault rule "
                 "(\"unit=FIN,nth=3,error=E_FIN_FAILED FIN failed\"; docs/testing.md), "
                 "--journal writes what the connections sent and were sent as JSON lines, "
                 "--admin-address serves the journal, the rules and the clock over HTTP "
                 "(GET /journal, POST and DELETE /faults, GET /clock, POST /clock/advance?ms=N), "
                 "and --manual-clock puts the broker's timers (message timeouts, delays, "
                 "deferrals, expiries) on a clock that moves only through POST /clock/advance. "
                 "NAME is one of:";
    for (const auto& factory : testing::test_brokers()) std::cout << " " << factory.name;
    std::cout << "\nWith a real server's name (nsqd, nsqlookupd, figg-server, memodb-broker) it "
                 "takes that server's own command line instead (polybus broker nsqd --help); "
                 "docs/testing.md.\n";
    return 0;
  }
  const std::string name = args.positional(0, "NAME");
  if (args.positional().size() > 1)
    throw UsageError("unexpected argument '" + args.positional()[1] + "'");
  const auto port = static_cast<std::uint16_t>(args.number("port", 0, 1, 65535));
  testing::TestBrokerOptions options;
  options.port = port;
  for (const std::string& rule : args.values("fault")) {
    try {
      options.faults.push_back(testing::parse_fault_rule(rule));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--fault: ") + e.what());
    }
  }
  if (args.has("manual-clock")) {
    if (!args.has("admin-address"))
      throw UsageError("--manual-clock needs --admin-address: the clock moves through it");
    options.clock = std::make_shared<polybus::ManualClock>();
  }
  // A journal written or served records, whatever it keeps.
  if (args.has("journal") || args.has("admin-address")) options.journal_capacity = 100000;
  block_termination_signals();
  if (args.has("nsqd") || args.has("topic")) {
    if (name != "nsq+lookupd") throw UsageError("--nsqd and --topic go with nsq+lookupd");
    if (!options.faults.empty() || options.journal_capacity > 0 || options.clock)
      throw UsageError(
          "--fault, --journal, --admin-address and --manual-clock take one broker, "
          "not a fan-out");
    return run_lookupd_fan_out(static_cast<std::uint32_t>(args.number("nsqd", 1, 1, 10'000)),
                               args.value("topic").value_or(""),
                               static_cast<std::uint16_t>(args.number("port", 0, 1, 65535)));
  }
  for (const auto& factory : testing::test_brokers()) {
    if (factory.name != name) continue;
    if (args.has("port") && !factory.start_on_port)
      throw UsageError("broker '" + name + "' listens on no TCP port; --port does not apply");
    if (!factory.start_with)
      throw UsageError("broker '" + name + "' is a stand-in for a real server: no options");
    std::unique_ptr<testing::TestBroker> broker;
    try {
      broker = factory.start_with(options);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot start " + name + " on 127.0.0.1:" +
                               (args.has("port") ? std::to_string(port) : "a free port") + ": " +
                               e.what());
    }
    std::string url = broker->url();
    // The test tuning (1 s redelivery, 10 ms reconnects...) only when asked for: a URL copied
    // into an application must not carry it unknowingly.
    if (!args.has("tuned-for-tests")) url = url.substr(0, url.find('?'));
    // Declared after the broker: destroyed first, so no scrape reads a broker that is gone.
    auto endpoint = metrics_endpoint_if_asked(args, [&broker, &name](std::string& body) {
      auto measured = broker->metrics();
      if (!measured) return;  // every in-process broker counts; a stand-in for a real one not
      measured->broker = name;
      metrics::write_prometheus(body, std::vector<metrics::BrokerMetrics>{std::move(*measured)});
    });
    testing::Journal* journal = broker->journal();
    testing::FaultRules* faults = broker->faults();
    if (const auto file = args.value("journal")) journal->write_to(*file);
    std::unique_ptr<testing::BrokerAdmin> admin;  // destroyed before the broker
    if (const auto where = args.value("admin-address")) {
      const auto at = listen_endpoint("--admin-address", *where);
      admin = std::make_unique<testing::BrokerAdmin>(at.address().to_string(), at.port(), *journal,
                                                     *faults, broker->clock());
      std::cerr << "admin (journal, faults, clock): listening on " << admin->address() << std::endl;
    }
    std::cout << url << std::endl;
    wait_for_termination_signal();
    return 0;
  }
  std::string known;
  for (const auto& factory : testing::test_brokers()) known += " " + factory.name;
  throw UsageError("no in-process broker '" + name + "'; known:" + known);
}

}  // namespace polybus::cli
