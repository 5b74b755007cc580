// SPDX-License-Identifier: Apache-2.0
// Internal: eight bytes of a JSON string's text tested at once (SWAR), so that quoting and
// checking a payload cost a few instructions per word instead of per byte. A word that is not
// all plain is left to the caller's byte-by-byte path, which decides for each byte.
#pragma once

#include <cstdint>
#include <cstring>

namespace polybus::text::detail {

constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

// Some byte of `word` is below n (n <= 128; exact: never true when none is).
constexpr std::uint64_t any_below(std::uint64_t word, std::uint8_t n) {
  return (word - kOnes * n) & ~word & kHighs;
}
// Some byte of `word` is c.
constexpr std::uint64_t any_equal(std::uint64_t word, std::uint8_t c) {
  const std::uint64_t x = word ^ (kOnes * c);
  return (x - kOnes) & ~x & kHighs;
}

inline std::uint64_t load_word(const void* at) {
  std::uint64_t word;
  std::memcpy(&word, at, sizeof word);
  return word;
}

// No byte is a control character, a quote or a backslash; with `go`, nor < > & (Go's encoder
// escapes them); with `ascii_only`, none is 0x80 or above (the checker validates those as UTF-8).
inline bool all_plain(std::uint64_t word, bool go, bool ascii_only) {
  std::uint64_t hit = any_below(word, 0x20) | any_equal(word, '"') | any_equal(word, '\\');
  if (go) hit |= any_equal(word, '<') | any_equal(word, '>') | any_equal(word, '&');
  if (ascii_only) hit |= word & kHighs;
  return hit == 0;
}

}  // namespace polybus::text::detail
