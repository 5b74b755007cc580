// SPDX-License-Identifier: Apache-2.0
#include "payload_stamp.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace polybus::bench {

namespace {

constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The two digits of each number below 100, for writing two at a time.
constexpr std::array<char, 200> kPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[2 * i] = static_cast<char>('0' + i / 10);
    pairs[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

// v's decimal digits, written backwards to end just before `end`: where they start. Eight
// digits at a time in 32-bit arithmetic, which costs less than a 64-bit division per pair.
char* put_digits(char* end, std::uint64_t v) {
  auto pair = [&](std::uint32_t two) {
    end -= 2;
    std::memcpy(end, kPairs.data() + 2 * two, 2);
  };
  while (v >= 100'000'000) {
    auto low = static_cast<std::uint32_t>(v % 100'000'000);
    v /= 100'000'000;
    for (int i = 0; i < 4; ++i, low /= 100) pair(low % 100);
  }
  auto w = static_cast<std::uint32_t>(v);
  for (; w >= 100; w /= 100) pair(w % 100);
  if (w >= 10)
    pair(w);
  else
    *--end = static_cast<char>('0' + w);
  return end;
}

}  // namespace

std::size_t format_stamp(char* out, std::uint64_t sequence, std::int64_t stamp_ns) {
  char digits[20];
  char* const last = digits + sizeof digits;
  std::size_t n = 0;
  auto put = [&](std::uint64_t v) {
    const char* first = put_digits(last, v);
    std::memcpy(out + n, first, static_cast<std::size_t>(last - first));
    n += static_cast<std::size_t>(last - first);
    out[n++] = ' ';
  };
  put(sequence);
  put(stamp_ns > 0 ? static_cast<std::uint64_t>(stamp_ns) : 0);  // 0: a stamp no reader takes
  return n;
}

bool stamp_payload(std::string& payload, std::uint64_t sequence, std::int64_t stamp_ns) {
  char head[kLongestStamp];
  const std::size_t size = format_stamp(head, sequence, stamp_ns);
  if (payload.size() < size) return false;
  std::memcpy(payload.data(), head, size);
  return true;
}

// Read in one pass, the sequence skipped: digits, a space, digits, a space, each number 19 digits
// at most (longer than any value a stamp holds). This runs for every message a bench receives.
std::optional<std::int64_t> payload_stamp(std::string_view payload) {
  const char* at = payload.data();
  const char* const end = at + payload.size();
  const char* first = at;
  const char* limit = at + std::min<std::size_t>(19, payload.size());
  while (at < limit && is_digit(*at)) ++at;
  if (at == first || at == end || *at != ' ') return std::nullopt;
  first = ++at;
  limit = at + std::min<std::size_t>(19, static_cast<std::size_t>(end - at));
  std::uint64_t stamp = 0;
  for (; at < limit && is_digit(*at); ++at)
    stamp = stamp * 10 + static_cast<std::uint64_t>(*at - '0');
  if (at == first || at == end || *at != ' ' || stamp == 0 ||
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
