// SPDX-License-Identifier: Apache-2.0
// The application-side suite: every scheme registered, as an application would; and the
// programs a case runs in a process of its own (`--child NAME`), for a rule whose breach ends
// the process.
#include <cstring>

#include "catch_session.hpp"
#include "child_programs.hpp"
#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0)
    return polybus::test::run_child_program(argv[2]);
  return polybus::test::run_catch_session(argc, argv);
}
