// JSON checks and string literals. Parsing is iterative (RapidJSON's kParseIterativeFlag), so
// deeply nested hostile input cannot overflow the stack.
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "polybus/quickio/codec.hpp"

namespace polybus::quickio {
namespace {

constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// RapidJSON's streams treat '\0' as the end of input; a raw NUL is never valid JSON anyway, so it
// is refused before parsing (otherwise "null\0junk" would pass).
template <typename Handler>
bool parse_whole(std::string_view json, Handler& handler) {
  if (json.find('\0') != std::string_view::npos) return false;
  rapidjson::MemoryStream memory(json.data(), json.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(memory);
  rapidjson::Reader reader;
  return !reader.Parse<kFlags>(input, handler).IsError();
}

// Any value, nested at most max_depth deep.
struct AnyValue : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, AnyValue> {
  explicit AnyValue(std::size_t max_depth) : max_depth(max_depth) {}
  std::size_t max_depth;
  std::size_t depth = 0;
  bool StartObject() { return ++depth <= max_depth; }
  bool StartArray() { return ++depth <= max_depth; }
  bool EndObject(rapidjson::SizeType) { return --depth, true; }
  bool EndArray(rapidjson::SizeType) { return --depth, true; }
};

// Accepts only a root string, keeping it.
struct RootString : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, RootString> {
  std::string value;
  bool Default() { return false; }
  bool String(const char* text, rapidjson::SizeType length, bool) {
    value.assign(text, length);
    return true;
  }
};

}  // namespace

bool is_valid_json(std::string_view json, std::size_t max_depth) {
  AnyValue handler(max_depth);
  return parse_whole(json, handler);
}

bool json_unquote(std::string_view json, std::string& out) {
  RootString handler;
  if (!parse_whole(json, handler)) return false;
  // RapidJSON 1.1.0 decodes a lone low surrogate escape (\udc00-\udfff) into bytes that are not
  // UTF-8 (found by the quickio_json fuzzer): such a string is refused.
  if (!is_valid_utf8(handler.value)) return false;
  out = std::move(handler.value);
  return true;
}

std::string json_quote(std::string_view utf8) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(utf8.size() + 2);
  out.push_back('"');
  for (char c : utf8) {
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
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out.push_back(kHex[(c >> 4) & 0xf]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

bool is_valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    unsigned char lead = *p;
    if (lead < 0x80) {
      ++p;
      continue;
    }
    std::size_t extra = 0;
    std::uint32_t code = 0;
    std::uint32_t min = 0;
    if ((lead & 0xe0) == 0xc0) {
      extra = 1, code = lead & 0x1f, min = 0x80;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code = lead & 0x0f, min = 0x800;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code = lead & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) <= extra) return false;
    for (std::size_t i = 1; i <= extra; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      code = (code << 6) | (p[i] & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    p += extra + 1;
  }
  return true;
}

}  // namespace polybus::quickio
