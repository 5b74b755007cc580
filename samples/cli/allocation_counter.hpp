// The number of C++ heap allocations this process made (every operator new), so that `polybus
// bench` reports allocations per message. Counted by replacing the global operator new in the
// polybus command only; allocations made with malloc by C libraries (NNG, libcbor) are not seen.
#pragma once

#include <cstdint>

namespace polybus::cli {

std::uint64_t allocations_so_far();

}  // namespace polybus::cli
