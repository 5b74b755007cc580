// SPDX-License-Identifier: Apache-2.0
// Catch2's implementation, once for every test program (each compiled it in its own main's
// file: about 30 s of compiler time per program and build).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace polybus::test {

int run_catch_session(int argc, char* argv[]) {
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  // ctest runs each test case alone, by its name. A name that matches no test case (one that
  // CMake's lists cut in two at a ';', a renamed case whose old ctest entry is still there) would
  // otherwise pass having run nothing: Catch's -w NoTests makes it fail with status 2.
  auto& config = session.configData();
  config.warnings =
      static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
  return session.run();
}

}  // namespace polybus::test
