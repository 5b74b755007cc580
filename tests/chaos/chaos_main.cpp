// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "catch_session.hpp"
#include "polybus/all.hpp"
#include "polybus/register_all_test_brokers.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  return polybus::test::run_catch_session(argc, argv);
}
