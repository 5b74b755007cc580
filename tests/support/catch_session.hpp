// SPDX-License-Identifier: Apache-2.0
// Catch2's implementation is compiled once, in catch_session.cpp, for every test program: a
// program's own main() does its set-up, then runs its test cases through this.
#pragma once

namespace polybus::test {

// Catch::Session().run(argc, argv), where a test name or filter that matches no test case fails
// (status 2) instead of passing with nothing run.
int run_catch_session(int argc, char* argv[]);

}  // namespace polybus::test
