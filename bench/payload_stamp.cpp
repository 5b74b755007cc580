// SPDX-License-Identifier: Apache-2.0
#include "payload_stamp.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace polybus::bench {

bool stamp_payload(std::string& payload, std::uint64_t sequence, std::int64_t stamp_ns) {
  char head[kLongestStamp + 1];
  char* end = std::to_chars(head, head + 20, sequence).ptr;
  *end++ = ' ';
  end = std::to_chars(end, end + 19, stamp_ns).ptr;
  *end++ = ' ';
  const auto size = static_cast<std::size_t>(end - head);
  if (payload.size() < size) return false;
  std::memcpy(payload.data(), head, size);
  return true;
}

// Read in one pass (two finds and two from_chars were a third of the bench's own cost per
// message received): digits, a space, digits, a space.
std::optional<std::int64_t> payload_stamp(std::string_view payload) {
  std::size_t at = 0;
  auto digits = [&](std::uint64_t& value, std::size_t most) {
    const std::size_t first = at;
    while (at < payload.size() && payload[at] >= '0' && payload[at] <= '9') {
      if (at - first == most) return false;  // longer than any value it can hold
      value = value * 10 + static_cast<std::uint64_t>(payload[at++] - '0');
    }
    return at > first && at < payload.size() && payload[at++] == ' ';
  };
  std::uint64_t sequence = 0, stamp = 0;
  if (!digits(sequence, 19) || !digits(stamp, 19) || stamp == 0 ||
      stamp > static_cast<std::uint64_t>(INT64_MAX))
    return std::nullopt;
  return static_cast<std::int64_t>(stamp);
}

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace polybus::bench
