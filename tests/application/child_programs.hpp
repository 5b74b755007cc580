// SPDX-License-Identifier: Apache-2.0
// Programs the application suite runs in a process of their own, for rules whose breach ends the
// process (tests/application/application_main.cpp runs one as `--child NAME`).
#pragma once

#include <string>

namespace polybus::test {

// Runs the named program; its exit status. An unknown name is status 2.
int run_child_program(const std::string& name);

// Runs this test program again as `--child NAME`: what it wrote to stdout and stderr, and its
// wait status (as waitpid gives it).
struct ChildResult {
  std::string output;
  int wait_status = 0;
};
ChildResult run_child(const std::string& name);

}  // namespace polybus::test
