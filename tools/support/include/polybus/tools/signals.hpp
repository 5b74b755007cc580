// SPDX-License-Identifier: Apache-2.0
// Ctrl-C and SIGTERM for a command that runs until interrupted, so that it closes cleanly.
#pragma once

namespace polybus::cli {

// Call before connecting (threads inherit the mask), then wait: a clean close on Ctrl-C.
void block_termination_signals();
void wait_for_termination_signal();

}  // namespace polybus::cli
