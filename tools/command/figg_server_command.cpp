// SPDX-License-Identifier: Apache-2.0
// broker figg-server: the in-process Figg broker under the Figg server's own command line
// (github.com/dmarto/figg's go-flags options), with the real server's behaviour (its quirks),
// so that a script that starts `figg-server` runs against it through a two-line shim.
#include <iostream>
#include <stdexcept>
#include <tuple>

#include "commands.hpp"
#include "go_flags.hpp"
#include "polybus/figg_testing.hpp"

namespace polybus::cli {

int run_figg_server(const Argv& argv) {
  using Kind = GoFlags::Kind;
  figg::testing::BrokerOptions options;
  options.port = 8119;  // the server's default, -a 127.0.0.1:8119
  options.real_server_quirks = true;
  std::string commitlog_dir;
  GoFlags flags;
  const auto address = [&options](const std::string& v) {
    std::tie(options.host, options.port) = parse_listen_address(v, "--addr");
  };
  flags.take("addr", Kind::value, address);
  flags.take("a", Kind::value, address);
  flags.take("commitlog.inmemory", Kind::boolean, [](const std::string& v) {
    parse_go_bool(v, "--commitlog.inmemory");  // the log is in memory whatever it says
  });
  flags.take("commitlog.dir", Kind::value, [&](const std::string& v) { commitlog_dir = v; });
  flags.refuse("commitlog.segment-size", Kind::value, "the log is kept in memory, unsegmented");
  flags.refuse("admin-addr", Kind::value, "the admin endpoints are not served");
  flags.accept("verbose", Kind::boolean);
  flags.accept("v", Kind::boolean);
  if (flags.parse(argv, "")) {
    std::cout << "usage: polybus broker figg-server [figg-server options]\n"
                 "Runs the in-process Figg broker, with the real server's quirks, under "
                 "figg-server's command line: pub/sub clients on --addr (127.0.0.1:8119).\n"
              << flags.describe();
    return 0;
  }
  block_termination_signals();
  std::unique_ptr<figg::testing::Broker> broker;
  try {
    broker = figg::testing::Broker::launch(options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot start figg-server on " + options.host + ":" +
                             std::to_string(options.port) + ": " + e.what());
  }
  std::cerr << "figg-server: listening on " << options.host << ":" << broker->port() << std::endl;
  if (!commitlog_dir.empty()) {
    std::cerr << "figg-server: --commitlog.dir " << commitlog_dir
              << ": the log is kept in memory only, and goes with the process" << std::endl;
  }
  wait_for_termination_signal();
  return 0;
}

}  // namespace polybus::cli
