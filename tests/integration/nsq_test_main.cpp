// SPDX-License-Identifier: Apache-2.0
// NSQ integration tests against real nsqd/nsqlookupd 1.3 (the Go harness). Without
// POLYBUS_NSQ_HARNESS they cannot run: the binary exits with 77, which ctest reports as skipped.
#include <catch2/catch.hpp>
#include <iostream>

#include "catch_session.hpp"
#include "nsq_harness_broker.hpp"
#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing && polybus::test::nsq_harness_binary().empty()) {
    std::cout
        << "skipped: POLYBUS_NSQ_HARNESS is not set (bash .ci/test builds the real nsqd harness)\n";
    return 77;
  }
  return polybus::test::run_catch_session(argc, argv);
}
