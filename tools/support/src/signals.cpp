// SPDX-License-Identifier: Apache-2.0
#include <csignal>

#include "polybus/tools/signals.hpp"

namespace polybus::cli {

namespace {
sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_termination_signals() {
  sigset_t set = termination_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void wait_for_termination_signal() {
  sigset_t set = termination_signals();
  int signal_number = 0;
  sigwait(&set, &signal_number);
}

}  // namespace polybus::cli
