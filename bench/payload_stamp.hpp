// SPDX-License-Identifier: Apache-2.0
// The send time a bench payload carries, so that whoever receives it measures the latency from
// publish to receipt: "<sequence> <nanoseconds> " at the payload's start, the rest left as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace polybus::bench {

// The longest stamp: the smallest payload that always carries one.
constexpr std::size_t kLongestStamp = 20 + 1 + 19 + 1;
// Writes the stamp's text to out (kLongestStamp bytes at least); returns its length.
std::size_t format_stamp(char* out, std::uint64_t sequence, std::int64_t stamp_ns);
// Writes the stamp over the start of `payload` when it fits (else leaves the payload unstamped:
// a 10-byte message carries no latency). Returns whether it did.
bool stamp_payload(std::string& payload, std::uint64_t sequence, std::int64_t stamp_ns);
// The send time of a stamped payload; nothing for any other payload.
std::optional<std::int64_t> payload_stamp(std::string_view payload);
// The wall clock stamps are taken on: nanoseconds since the epoch.
std::int64_t wall_clock_ns();

}  // namespace polybus::bench
