#include "go_text.hpp"

#include <cstdint>

#include "polybus/adapter/text.hpp"

namespace polybus::nsq::testing::detail {

using polybus::text::append_hex_byte;

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
    const std::size_t length = polybus::text::utf8_sequence(text, code_point);
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
  return polybus::text::json_quote(text, polybus::text::JsonEscapes::go);
}

}  // namespace polybus::nsq::testing::detail
