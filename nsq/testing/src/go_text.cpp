#include "go_text.hpp"

#include <cstdint>

namespace polybus::nsq::testing::detail {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_hex_byte(std::string& out, std::string_view prefix, unsigned value) {
  out += prefix;
  out += kHex[(value >> 4) & 0xf];
  out += kHex[value & 0xf];
}

// Length of the valid UTF-8 sequence at the start of `text` and its code point, or 0 when the
// first byte does not start one (overlong forms and surrogates are invalid, as in Go).
std::size_t utf8_sequence(std::string_view text, std::uint32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  std::uint32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code_point = lead & 0x1f;
    min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code_point = lead & 0x0f;
    min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code_point = lead & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3f);
  }
  if (code_point < min || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) {
    return 0;
  }
  return length;
}

}  // namespace

std::string go_quote(std::string_view text) {
  std::string out = "\"";
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text[0]);
    if (c < 0x80) {
      switch (c) {
        case '\a':
          out += "\\a";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\v':
          out += "\\v";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '"':
          out += "\\\"";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            append_hex_byte(out, "\\x", c);
          } else {
            out += static_cast<char>(c);
          }
      }
      text.remove_prefix(1);
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = utf8_sequence(text, code_point);
    if (length == 0) {
      append_hex_byte(out, "\\x", c);
      text.remove_prefix(1);
    } else if (code_point < 0xa0) {  // C1 controls
      out += "\\u00";
      append_hex_byte(out, "", code_point);
      text.remove_prefix(length);
    } else {
      out.append(text.data(), length);
      text.remove_prefix(length);
    }
  }
  out += '"';
  return out;
}

std::string go_json_string(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == '<' || c == '>' || c == '&') {
          append_hex_byte(out, "\\u00", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace polybus::nsq::testing::detail
