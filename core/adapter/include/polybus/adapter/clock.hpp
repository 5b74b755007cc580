// SPDX-License-Identifier: Apache-2.0
// The one clock of deadlines, timers and latencies: steady, so a wall-clock step moves none.
#pragma once

#include <chrono>

namespace polybus {

using Clock = std::chrono::steady_clock;

}  // namespace polybus
