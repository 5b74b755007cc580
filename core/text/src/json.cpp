// SPDX-License-Identifier: Apache-2.0
// JSON validity with a depth bound, shared by every codec that checks JSON it did not parse
// itself (QuickIO's event data and callback bodies, the CloudEvents envelope's JSON data).
//
// A scanner of its own rather than RapidJSON's Reader: it runs once per received event, and the
// Reader copies every string it meets into a heap-allocated stack to unescape it, where a check
// needs neither (about 6x slower on a 200-byte string; docs/performance.md). It takes RFC 8259's
// grammar and what RapidJSON 1.1 with kParseValidateEncodingFlag takes, which
// tests/fuzz/core_json_fuzzer.cpp checks input by input: well-formed UTF-8 in strings, a high
// surrogate escape followed by its low half, one value and white space around it. Unlike
// RapidJSON it takes numbers past a double's range (JSON sets no limit) and refuses a UTF-8 BOM
// (RFC 8259 8.1). Iterative, so deep hostile input cannot overflow the stack.
#include <cstdint>
#include <vector>

#include "json_bytes.hpp"
#include "polybus/text/text.hpp"

namespace polybus::text {

namespace {

// Bytes that stand for themselves in a string: printable ASCII but the quote and the backslash.
struct PlainBytes {
  bool plain[256];
  constexpr PlainBytes() : plain() {
    for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  }
};
constexpr PlainBytes kPlain{};

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()) {}

  bool valid(std::size_t max_depth) {
    skip_space();
    for (;;) {
      // A value starts here.
      if (p_ == end_) return false;
      const unsigned char c = *p_;
      if (c == '{' || c == '[') {
        ++p_;
        if (!open(c == '{', max_depth)) return false;
        skip_space();
        if (p_ != end_ && *p_ == (c == '{' ? '}' : ']')) {
          ++p_;
          close();
        } else {
          if (c == '{' && !member_name()) return false;
          continue;
        }
      } else if (c == '"') {
        if (!string()) return false;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (!number()) return false;
      } else if (!literal(c == 't' ? "true" : c == 'f' ? "false" : "null")) {
        return false;
      }
      // After a value: the end, a comma before the next one, or the end of containers.
      for (;;) {
        skip_space();
        if (depth_ == 0) return p_ == end_;
        if (p_ == end_) return false;
        const bool object = in_object();
        if (*p_ == ',') {
          ++p_;
          skip_space();
          if (object && !member_name()) return false;
          break;
        }
        if (*p_ != (object ? '}' : ']')) return false;
        ++p_;
        close();
      }
    }
  }

 private:
  // Open containers, innermost last: true for an object. The first kInline need no allocation.
  static constexpr std::size_t kInline = 64;

  bool open(bool object, std::size_t max_depth) {
    if (depth_ >= max_depth) return false;
    if (depth_ < kInline)
      inline_kinds_[depth_] = object;
    else
      deep_kinds_.push_back(object);
    ++depth_;
    return true;
  }
  void close() {
    if (depth_ > kInline) deep_kinds_.pop_back();
    --depth_;
  }
  bool in_object() const {
    return depth_ <= kInline ? inline_kinds_[depth_ - 1] : deep_kinds_.back();
  }

  void skip_space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // `"name" :`, leaving the scanner where the member's value starts.
  bool member_name() {
    if (p_ == end_ || *p_ != '"' || !string()) return false;
    skip_space();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    skip_space();
    return true;
  }
  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size()) return false;
    for (char w : word)
      if (*p_++ != static_cast<unsigned char>(w)) return false;
    return true;
  }
  bool digits() {
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return true;
  }
  bool number() {
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!digits()) {
      return false;
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!digits()) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return false;
    }
    return true;
  }
  // Four hex digits, or -1.
  int hex4() {
    if (end_ - p_ < 4) return -1;
    int value = 0;
    for (int i = 0; i < 4; ++i) {
      const int digit = hex_digit_value(static_cast<char>(*p_++));
      if (digit < 0) return -1;
      value = value << 4 | digit;
    }
    return value;
  }
  // The UTF-8 sequence whose lead byte (0x80 or above) is at p_, if well-formed.
  bool utf8_sequence() {
    std::uint32_t code_point = 0;
    const std::size_t length = text::utf8_sequence(
        std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(end_ - p_)),
        code_point);
    p_ += length;
    return length != 0;
  }
  bool string() {
    ++p_;  // the opening quote
    for (;;) {
      while (end_ - p_ >= 8 && text::detail::all_plain(text::detail::load_word(p_), false, true))
        p_ += 8;
      while (p_ != end_ && kPlain.plain[*p_]) ++p_;
      if (p_ == end_) return false;
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!escape()) return false;
      } else if (c < 0x20 || !utf8_sequence()) {
        return false;  // a control character, or bytes that are not UTF-8
      }
    }
  }
  bool escape() {
    ++p_;  // the backslash
    if (p_ == end_) return false;
    const unsigned char e = *p_++;
    if (e != 'u')
      return e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
             e == 't';
    const int unit = hex4();
    if (unit < 0) return false;
    if (unit < 0xD800 || unit > 0xDBFF) return true;
    // A high surrogate wants its low half next.
    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
    p_ += 2;
    const int low = hex4();
    return low >= 0xDC00 && low <= 0xDFFF;
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::size_t depth_ = 0;
  bool inline_kinds_[kInline] = {};
  std::vector<bool> deep_kinds_;
};

}  // namespace

bool is_valid_json(std::string_view json, std::size_t max_depth) {
  return JsonScanner(json).valid(max_depth);
}

}  // namespace polybus::text
