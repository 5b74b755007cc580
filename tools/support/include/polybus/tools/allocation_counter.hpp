// SPDX-License-Identifier: Apache-2.0
// The number of C++ heap allocations this process made (every operator new), so that `polybus
// bench` reports allocations per message, and those of the calling thread, so that a unit test
// can count what one thread allocates while it works. Counted by replacing the global operator
// new in the binaries that link this (the polybus command, the unit tests); allocations made
// with malloc by C libraries (NNG, libcbor) are not seen.
#pragma once

#include <cstdint>

namespace polybus::cli {

std::uint64_t allocations_so_far();
std::uint64_t allocations_on_this_thread();

}  // namespace polybus::cli
