// The unit tests connect through URLs (mem:// above all): every scheme of the build is
// registered once, as an application would.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  return Catch::Session().run(argc, argv);
}
