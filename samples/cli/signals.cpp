// SPDX-License-Identifier: Apache-2.0
#include <csignal>

#include "commands.hpp"

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

std::string generated_payload(std::uint64_t i, std::size_t size) {
  std::string payload = std::to_string(i);
  if (payload.size() < size) {
    payload.push_back(' ');
    while (payload.size() < size) payload.push_back(static_cast<char>('a' + payload.size() % 26));
  }
  return payload;
}

}  // namespace polybus::cli
