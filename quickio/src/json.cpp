// SPDX-License-Identifier: Apache-2.0
// JSON checks and string literals. Parsing is iterative (RapidJSON's kParseIterativeFlag), so
// deeply nested hostile input cannot overflow the stack.
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"

namespace polybus::quickio {
namespace {

constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// RapidJSON's streams treat '\0' as the end of input; a raw NUL is never valid JSON anyway, so it
// is refused before parsing (otherwise "null\0junk" would pass).
template <typename Handler>
bool parse_whole(std::string_view json, Handler& handler) {
  if (json.find('\0') != std::string_view::npos) return false;
  // A plain memory stream: RapidJSON's UTF-8 EncodedInputStream skips any of a BOM's bytes at
  // the start, which is_valid_json (and JSON, RFC 8259 8.1) does not.
  rapidjson::MemoryStream input(json.data(), json.size());
  rapidjson::Reader reader;
  return !reader.Parse<kFlags>(input, handler).IsError();
}

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
  return text::is_valid_json(json, max_depth);
}

bool json_unquote(std::string_view json, std::string& out) {
  RootString handler;
  if (!parse_whole(json, handler)) return false;
  // RapidJSON 1.1.0 decodes a lone low surrogate escape (\udc00-\udfff) into bytes that are not
  // UTF-8 (found by the quickio_json fuzzer): such a string is refused.
  if (!text::is_valid_utf8(handler.value)) return false;
  out = std::move(handler.value);
  return true;
}

}  // namespace polybus::quickio
