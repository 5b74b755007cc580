// SPDX-License-Identifier: Apache-2.0
// Big-endian (network order) integers of 1-8 bytes, as every protocol here frames its lengths.
// Written through one append of a local array: appending byte by byte checks the string's
// capacity once per byte, which showed as 5% of a Figg publish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace polybus {

template <std::size_t Bytes>
void store_big_endian(char* at, std::uint64_t value) noexcept {
  static_assert(Bytes >= 1 && Bytes <= 8, "1 to 8 bytes");
  for (std::size_t i = 0; i < Bytes; ++i)
    at[i] = static_cast<char>((value >> (8 * (Bytes - 1 - i))) & 0xff);
}

template <std::size_t Bytes>
void append_big_endian(std::string& out, std::uint64_t value) {
  char bytes[Bytes];
  store_big_endian<Bytes>(bytes, value);
  out.append(bytes, Bytes);
}

// The same for a width known when compiling: unrolled, which the compiler turns into one load
// and a byte swap, where the loop over a run-time count stays a loop.
template <std::size_t Bytes>
std::uint64_t read_big_endian(const char* bytes) noexcept {
  static_assert(Bytes >= 1 && Bytes <= 8, "1 to 8 bytes");
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < Bytes; ++i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

inline std::uint64_t read_big_endian(const char* bytes, std::size_t count) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < count; ++i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace polybus
