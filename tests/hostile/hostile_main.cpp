// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "catch_session.hpp"
#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  return polybus::test::run_catch_session(argc, argv);
}
