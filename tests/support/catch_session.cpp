// Catch2's implementation, once for every test program (each compiled it in its own main's
// file: about 30 s of compiler time per program and build).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace polybus::test {

int run_catch_session(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}

}  // namespace polybus::test
