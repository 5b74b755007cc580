// SPDX-License-Identifier: Apache-2.0
#include "catch_session.hpp"

int main(int argc, char* argv[]) {
  return polybus::test::run_catch_session(argc, argv);
}
