// SPDX-License-Identifier: Apache-2.0
// Big-endian (network order) integers of 1-8 bytes, as every protocol here frames its lengths.
// Written through one append of a local array: appending byte by byte checks the string's
// capacity once per byte, which showed as 5% of a Figg publish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace polybus {

namespace big_endian_detail {

// Widths a machine word holds, loaded or stored whole and byte-swapped where the host is little-
// endian: GCC at -O2 leaves the byte loops below as loops, eight iterations of shifts and
// single-byte moves for a u64, which showed as 3% of a Figg message's instructions.
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
template <std::size_t Bytes>
struct Word {
  static constexpr bool kSwapped = false;
};
template <>
struct Word<2> {
  static constexpr bool kSwapped = true;
  using Type = std::uint16_t;
  static Type swap(Type v) noexcept { return __builtin_bswap16(v); }
};
template <>
struct Word<4> {
  static constexpr bool kSwapped = true;
  using Type = std::uint32_t;
  static Type swap(Type v) noexcept { return __builtin_bswap32(v); }
};
template <>
struct Word<8> {
  static constexpr bool kSwapped = true;
  using Type = std::uint64_t;
  static Type swap(Type v) noexcept { return __builtin_bswap64(v); }
};
#else
template <std::size_t Bytes>
struct Word {
  static constexpr bool kSwapped = false;
};
#endif

}  // namespace big_endian_detail

template <std::size_t Bytes>
void store_big_endian(char* at, std::uint64_t value) noexcept {
  static_assert(Bytes >= 1 && Bytes <= 8, "1 to 8 bytes");
  using Word = big_endian_detail::Word<Bytes>;
  if constexpr (Word::kSwapped) {
    const auto word = Word::swap(static_cast<typename Word::Type>(value));
    std::memcpy(at, &word, Bytes);
  } else {
    for (std::size_t i = 0; i < Bytes; ++i)
      at[i] = static_cast<char>((value >> (8 * (Bytes - 1 - i))) & 0xff);
  }
}

template <std::size_t Bytes>
void append_big_endian(std::string& out, std::uint64_t value) {
  char bytes[Bytes];
  store_big_endian<Bytes>(bytes, value);
  out.append(bytes, Bytes);
}

// The same for a width known when compiling.
template <std::size_t Bytes>
std::uint64_t read_big_endian(const char* bytes) noexcept {
  static_assert(Bytes >= 1 && Bytes <= 8, "1 to 8 bytes");
  using Word = big_endian_detail::Word<Bytes>;
  if constexpr (Word::kSwapped) {
    typename Word::Type word;
    std::memcpy(&word, bytes, Bytes);
    return Word::swap(word);
  } else {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < Bytes; ++i)
      value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    return value;
  }
}

inline std::uint64_t read_big_endian(const char* bytes, std::size_t count) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < count; ++i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace polybus
