// SPDX-License-Identifier: Apache-2.0
#include "go_text.hpp"

#include <cstdint>

#include "polybus/text/text.hpp"

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

std::string go_json_string_array(const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += go_json_string(values[i]);
  }
  return out + "]";
}

namespace {

// Digits of `value` / 10^precision with the fraction's trailing zeros (and a bare point) dropped.
std::string fixed_trimmed(std::uint64_t value, int precision) {
  std::string digits = std::to_string(value);
  if (precision == 0) return digits;
  if (digits.size() <= static_cast<std::size_t>(precision)) {
    digits.insert(0, static_cast<std::size_t>(precision) + 1 - digits.size(), '0');
  }
  std::string out = digits.substr(0, digits.size() - static_cast<std::size_t>(precision));
  std::string fraction = digits.substr(digits.size() - static_cast<std::size_t>(precision));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  if (!fraction.empty()) out += "." + fraction;
  return out;
}

}  // namespace

std::string go_duration(std::chrono::nanoseconds duration) {
  const bool negative = duration.count() < 0;
  std::uint64_t ns = negative ? static_cast<std::uint64_t>(-(duration.count() + 1)) + 1
                              : static_cast<std::uint64_t>(duration.count());
  std::string out;
  if (ns == 0) return "0s";
  if (ns < 1000) {
    out = std::to_string(ns) + "ns";
  } else if (ns < 1000 * 1000) {
    out = fixed_trimmed(ns, 3) + "\xc2\xb5s";  // U+00B5, as Go writes it
  } else if (ns < 1000ULL * 1000 * 1000) {
    out = fixed_trimmed(ns, 6) + "ms";
  } else {
    const std::uint64_t total_seconds = ns / 1000000000ULL;
    const std::uint64_t hours = total_seconds / 3600;
    const std::uint64_t minutes = (total_seconds / 60) % 60;
    const std::uint64_t seconds_ns = ns - (hours * 3600 + minutes * 60) * 1000000000ULL;
    if (hours > 0) out += std::to_string(hours) + "h";
    if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
    out += fixed_trimmed(seconds_ns, 9) + "s";
  }
  return negative ? "-" + out : out;
}

std::string go_pad(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace polybus::nsq::testing::detail
