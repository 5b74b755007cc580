// SPDX-License-Identifier: Apache-2.0
// broker memodb-broker: the in-process MemoDB broker under memodb-broker's command line (one
// positional listen URL, tcp://IP:PORT or ipc:///path, as NNG writes it), so that a script that
// starts `memodb-broker` runs against it through a two-line shim.
#include <iostream>
#include <stdexcept>

#include "commands.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/tools/args.hpp"

namespace polybus::cli {

int run_memodb_broker(const Argv& argv) {
  std::string url;
  for (const std::string& arg : argv) {
    if (arg == "-h" || arg == "--help") {
      std::cout << "usage: polybus broker memodb-broker URL\n"
                   "Runs the in-process MemoDB broker on URL (tcp://IP:PORT or ipc:///path), as "
                   "memodb-broker <broker port> does. Its LLVM options are not taken.\n";
      return 0;
    }
    if (arg == "--version") {
      std::cout << "memodb-broker (polybus in-process MemoDB broker)\n";
      return 0;
    }
    if (!arg.empty() && arg[0] == '-') {
      throw UsageError("memodb-broker: unknown option '" + arg + "' (polybus takes the URL only)");
    }
    if (!url.empty())
      throw UsageError("memodb-broker: one URL, not '" + url + "' and '" + arg + "'");
    url = arg;
  }
  if (url.empty()) throw UsageError("memodb-broker: the listen URL is missing");
  if (url.rfind("tcp://", 0) != 0 && url.rfind("ipc://", 0) != 0) {
    throw UsageError("memodb-broker: '" + url + "' is neither tcp://IP:PORT nor ipc:///path");
  }
  memodb::testing::BrokerOptions options;
  options.url = url;
  block_termination_signals();
  std::unique_ptr<memodb::testing::Broker> broker;
  try {
    broker = memodb::testing::Broker::launch(options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot start memodb-broker on " + url + ": " + e.what());
  }
  std::cerr << "memodb-broker: listening on " << broker->url() << std::endl;
  wait_for_termination_signal();
  return 0;
}

}  // namespace polybus::cli
