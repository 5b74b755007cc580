#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  return Catch::Session().run(argc, argv);
}
