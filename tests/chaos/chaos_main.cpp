#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "polybus/all.hpp"
#include "polybus/register_all_test_brokers.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  return Catch::Session().run(argc, argv);
}
