// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the fuzzers: the common input layout, chunking, and checks that abort (so
// libFuzzer records the input) with a message naming the broken invariant.
//
// Decoder fuzzers read their input as
//
//   [control][k split bytes][payload]      control: low 4 bits k, high 4 bits fuzzer flags
//
// and feed the payload twice: whole, then in chunks whose sizes cycle through the split bytes
// (each 1-256), or one byte at a time when k is 0 (the first KiB; see chunks()). An empty input
// is a payload of nothing.
// Machine fuzzers read an operation stream with ByteReader instead.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/text/text.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#endif
#endif

namespace polybus::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "\n*** fuzz invariant broken at %s:%d: %s\n", file, line, what);
  std::abort();
}

#define FUZZ_CHECK(cond)                                           \
  do {                                                             \
    if (!(cond)) ::polybus::fuzz::fail(__FILE__, __LINE__, #cond); \
  } while (0)

struct SplitInput {
  std::uint8_t flags = 0;          // the control byte's high 4 bits
  std::vector<std::size_t> sizes;  // chunk sizes, 1-256 each; empty: one byte at a time
  std::string_view payload;
};

inline SplitInput split_input(const std::uint8_t* data, std::size_t size) {
  SplitInput in;
  if (size == 0) return in;
  in.flags = static_cast<std::uint8_t>(data[0] >> 4);
  std::size_t k = data[0] & 0x0f;
  std::size_t pos = 1;
  for (; k > 0 && pos < size; --k, ++pos) in.sizes.push_back(std::size_t{data[pos]} + 1);
  in.payload = std::string_view(reinterpret_cast<const char*>(data) + pos, size - pos);
  return in;
}

// Without sizes: one byte at a time for the first kBytewise bytes, then 4 KiB at a time (feeding
// 64 KiB byte by byte would make large inputs a thousand times slower for little gain).
inline constexpr std::size_t kBytewise = 1024;

inline std::vector<std::string_view> chunks(std::string_view payload,
                                            const std::vector<std::size_t>& sizes) {
  std::vector<std::string_view> out;
  std::size_t i = 0, done = 0;
  while (!payload.empty()) {
    std::size_t n = !sizes.empty() ? sizes[i++ % sizes.size()] : done < kBytewise ? 1 : 4096;
    done += n;
    n = n < payload.size() ? n : payload.size();
    out.push_back(payload.substr(0, n));
    payload.remove_prefix(n);
  }
  return out;
}

// The chunks copied into one allocation, each starting 8-byte aligned and followed by a
// poisoned gap, so that ASan sees a read past a chunk's end (or before its start) as cheaply as
// with one allocation per chunk.
class OwnedChunks {
 public:
  std::vector<std::string_view> views;

  explicit OwnedChunks(const std::vector<std::string_view>& parts) {
    std::size_t total = 0;
    for (auto part : parts) total += slot(part.size());
    size_ = total ? total : kGap;
    storage_.reset(new char[size_]);
    std::size_t at = 0;
    for (auto part : parts) {
      char* p = storage_.get() + at;
      if (!part.empty()) std::memcpy(p, part.data(), part.size());
      views.emplace_back(p, part.size());
      poison(p + part.size(), slot(part.size()) - part.size());
      at += slot(part.size());
    }
  }
  ~OwnedChunks() { unpoison(storage_.get(), size_); }
  OwnedChunks(const OwnedChunks&) = delete;
  OwnedChunks& operator=(const OwnedChunks&) = delete;

 private:
  static constexpr std::size_t kGap = 16;
  static std::size_t slot(std::size_t n) { return (n + 7) / 8 * 8 + kGap; }
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POLYBUS_FUZZ_ASAN 1
#endif
#endif
#ifdef POLYBUS_FUZZ_ASAN
  static void poison(const char* p, std::size_t n) {
    __asan_poison_memory_region(p, n);
  }
  static void unpoison(const char* p, std::size_t n) {
    __asan_unpoison_memory_region(p, n);
  }
#else
  static void poison(const char*, std::size_t) {}
  static void unpoison(const char*, std::size_t) {}
#endif
  std::unique_ptr<char[]> storage_;
  std::size_t size_ = 0;
};

// Reads fuzz-chosen values off an operation stream; past the end everything is zero/empty.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  std::size_t remaining() const { return size_ - pos_; }
  std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool flag() { return (u8() & 1) != 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() << 8 | u8()); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(u16()) << 16 | u16(); }
  std::uint64_t u64() { return static_cast<std::uint64_t>(u32()) << 32 | u32(); }
  std::string_view bytes(std::size_t n) {
    n = n < remaining() ? n : remaining();
    std::string_view out(reinterpret_cast<const char*>(data_) + pos_, n);
    pos_ += n;
    return out;
  }
  // A length-prefixed (one byte) string.
  std::string_view short_bytes() { return bytes(u8()); }
  std::string_view rest() { return bytes(remaining()); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Known findings (README.md): paths into a defect already reported are left alone by default so
// that fuzzing goes on past it; POLYBUS_FUZZ_KNOWN=1 in the environment takes them again (to
// run a reproducer under tests/fuzz/regressions/, or to check a fix).
inline bool known_findings() {
  static const bool on = std::getenv("POLYBUS_FUZZ_KNOWN") != nullptr;
  return on;
}

// Strict UTF-8 (the library's own check; tests/unit/text_test.cpp pins it down case by case).
inline bool valid_utf8(std::string_view s) {
  return polybus::text::is_valid_utf8(s);
}

// Known finding 1 (README.md): RapidJSON 1.1.0 turns a lone low-surrogate escape ("\udc00" to
// "\udfff") into the 3-byte UTF-8 form of the surrogate (ED B0-BF xx), which is not UTF-8.
inline bool has_encoded_surrogate(std::string_view s) {
  for (std::size_t i = 0; i + 1 < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) == 0xed &&
        (static_cast<unsigned char>(s[i + 1]) & 0xe0) == 0xa0)
      return true;
  return false;
}

// Known finding 3 (README.md): websocketpp 0.8.2 stores an HTTP response's status code as its
// enum status_code::value, whose values are 0-511; another number is undefined behaviour
// (UBSan: "load of value N, which is not a valid value"). True when the response's first line
// carries such a number, parsed as websocketpp parses it.
inline bool websocketpp_status_outside_enum(std::string_view response) {
  const std::size_t eol = response.find("\r\n");
  if (eol == std::string_view::npos) return false;
  const std::string_view line = response.substr(0, eol);
  const std::size_t a = line.find(' ');
  if (a == std::string_view::npos) return false;
  const std::size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  std::string token(line.substr(a + 1, b - a - 1));
  const char* p = token.c_str();
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\v' || *p == '\f' || *p == '\r') ++p;
  char* end = nullptr;
  errno = 0;
  const long code = std::strtol(p, &end, 10);
  if (end == p || errno == ERANGE || code < INT32_MIN || code > INT32_MAX)
    return false;  // no number
  return code < 0 || code > 511;
}

// Touches every byte, so that ASan checks a view is still readable.
inline unsigned touch(std::string_view bytes) {
  unsigned sum = 0;
  for (char c : bytes) sum += static_cast<unsigned char>(c);
  return sum;
}

}  // namespace polybus::fuzz
