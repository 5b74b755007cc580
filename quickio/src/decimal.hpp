// SPDX-License-Identifier: Apache-2.0
// Decimal uint64 parsing shared by the event and callback-path parsers.
#pragma once

#include <cstdint>
#include <string_view>

namespace polybus::quickio::detail {

// Decimal digits only (no sign, no space), at least one, no overflow.
bool parse_decimal_u64(std::string_view digits, std::uint64_t& out);

}  // namespace polybus::quickio::detail
