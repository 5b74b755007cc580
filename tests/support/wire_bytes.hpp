// SPDX-License-Identifier: Apache-2.0
// Bytes as the NSQ protocols frame them, for tests that write raw frames: a 4-byte big-endian
// integer, and a body behind its 4-byte size (a command body, an nsqlookupd answer).
#pragma once

#include <cstdint>
#include <string>

#include "polybus/text/big_endian.hpp"

namespace polybus::test {

inline std::string be32(std::uint32_t value) {
  std::string out;
  append_big_endian<4>(out, value);
  return out;
}

inline std::string size_prefixed(const std::string& body) {
  return be32(static_cast<std::uint32_t>(body.size())) + body;
}

}  // namespace polybus::test
