// SPDX-License-Identifier: Apache-2.0
#include "polybus/text/text.hpp"

#include <cstdint>
#include <cstring>

#include "json_bytes.hpp"

namespace polybus::text {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Bytes that stand for themselves inside a JSON string, as a table: a byte's test is one load
// (six comparisons a byte were most of a QuickIO publish). Go's encoder also escapes < > &.
struct JsonPlainBytes {
  bool standard[256];
  bool go[256];
  constexpr JsonPlainBytes() : standard(), go() {
    for (int c = 0x20; c < 0x100; ++c) {
      standard[c] = c != '"' && c != '\\';
      go[c] = standard[c] && c != '<' && c != '>' && c != '&';
    }
  }
};
constexpr JsonPlainBytes kJsonPlain{};

}  // namespace

std::size_t utf8_sequence(std::string_view text, std::uint32_t& code_point) {
  if (text.empty()) return 0;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  std::size_t length = 0;
  std::uint32_t min = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code_point = lead & 0x1f, min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code_point = lead & 0x0f, min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code_point = lead & 0x07, min = 0x10000;
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

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    // ASCII, the common case, eight bytes at a time.
    std::uint64_t word = 0;
    if (text.size() - i >= sizeof word) {
      std::memcpy(&word, text.data() + i, sizeof word);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof word;
        continue;
      }
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // one at a time near a sequence
      ++i;
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = utf8_sequence(text.substr(i), code_point);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

void append_hex_byte(std::string& out, std::string_view prefix, unsigned byte) {
  out += prefix;
  out += kHex[(byte >> 4) & 0xf];
  out += kHex[byte & 0xf];
}

std::string percent_encode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (const char c : in) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                            (byte >= '0' && byte <= '9') || c == '-' || c == '.' || c == '_' ||
                            c == '~';
    if (unreserved)
      out += c;
    else
      append_hex_byte(out, "%", byte);
  }
  return out;
}

namespace {

// One byte that needs more than itself inside a JSON string.
void append_json_escape(std::string& out, char ch, bool go) {
  const auto c = static_cast<unsigned char>(ch);
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      if (!go) return void(out += "\\b");
      break;
    case '\f':
      if (!go) return void(out += "\\f");
      break;
    default:
      break;
  }
  append_hex_byte(out, "\\u00", c);  // other control bytes, and Go's <, > and &
}

}  // namespace

void append_json_quoted(std::string& out, std::string_view text, JsonEscapes escapes) {
  const bool go = escapes == JsonEscapes::go;
  const bool* plain = go ? kJsonPlain.go : kJsonPlain.standard;
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  // Runs of bytes that stand for themselves are appended whole.
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t run = i;
    while (text.size() - i >= 8 && detail::all_plain(detail::load_word(text.data() + i), go, false))
      i += 8;
    while (i < text.size() && plain[static_cast<unsigned char>(text[i])]) ++i;
    out.append(text.data() + run, i - run);
    if (i < text.size()) append_json_escape(out, text[i++], go);
  }
  out += '"';
}

std::string json_quote(std::string_view text, JsonEscapes escapes) {
  std::string out;
  append_json_quoted(out, text, escapes);
  return out;
}

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const char* describe(PercentError error) {
  switch (error) {
    case PercentError::none:
      return "no error";
    case PercentError::truncated_escape:
      return "truncated %-escape";
    case PercentError::bad_escape:
      return "bad %-escape";
  }
  return "unknown %-decoding error";
}

PercentError percent_decode(std::string_view in, std::string& out, bool plus_is_space) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return PercentError::truncated_escape;
      const int high = hex_digit_value(in[i + 1]);
      const int low = hex_digit_value(in[i + 2]);
      if (high < 0 || low < 0) return PercentError::bad_escape;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return PercentError::none;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view trim_json_space(std::string_view json) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!json.empty() && space(json.front())) json.remove_prefix(1);
  while (!json.empty() && space(json.back())) json.remove_suffix(1);
  return json;
}

std::string_view trim_http_space(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

void append_base64(std::string& out, std::string_view bytes) {
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16 |
                            static_cast<std::uint8_t>(bytes[i + 1]) << 8 |
                            static_cast<std::uint8_t>(bytes[i + 2]);
    out += kBase64[n >> 18];
    out += kBase64[(n >> 12) & 63];
    out += kBase64[(n >> 6) & 63];
    out += kBase64[n & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left == 0) return;
  std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16;
  if (left == 2) n |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
  out += kBase64[n >> 18];
  out += kBase64[(n >> 12) & 63];
  out += left == 2 ? kBase64[(n >> 6) & 63] : '=';
  out += '=';
}

bool base64_decode(std::string_view text, std::string& out, std::size_t& bad_at) {
  out.clear();
  if (text.size() % 4 != 0) {
    bad_at = text.size();
    return false;
  }
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        v[k] = 0;
        ++padding;
        continue;
      }
      v[k] = base64_value(c);
      if (v[k] < 0 || padding > 0) {
        bad_at = i + k;
        return false;
      }
    }
    const std::uint32_t n =
        static_cast<std::uint32_t>(v[0]) << 18 | static_cast<std::uint32_t>(v[1]) << 12 |
        static_cast<std::uint32_t>(v[2]) << 6 | static_cast<std::uint32_t>(v[3]);
    out += static_cast<char>(n >> 16);
    if (padding < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (padding < 1) out += static_cast<char>(n & 0xff);
  }
  return true;
}

}  // namespace polybus::text
