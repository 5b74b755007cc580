// SPDX-License-Identifier: Apache-2.0
// text::is_valid_json, the scanner every codec checks received JSON with, against RapidJSON's
// Reader (kParseIterativeFlag | kParseValidateEncodingFlag, the check it replaced): both judge
// every input alike, except where the scanner is documented to differ (core/text/src/json.cpp).
// Input: byte 0 sets the depth bound (1 + its low 7 bits); the rest is the JSON text.
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "fuzz_util.hpp"

namespace {

struct AnyValue : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, AnyValue> {
  explicit AnyValue(std::size_t max_depth) : max_depth(max_depth) {}
  std::size_t max_depth;
  std::size_t depth = 0;
  bool StartObject() { return ++depth <= max_depth; }
  bool StartArray() { return ++depth <= max_depth; }
  bool EndObject(rapidjson::SizeType) { return --depth, true; }
  bool EndArray(rapidjson::SizeType) { return --depth, true; }
};

rapidjson::ParseErrorCode rapidjson_verdict(std::string_view json, std::size_t max_depth) {
  rapidjson::MemoryStream memory(json.data(), json.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(memory);
  rapidjson::Reader reader;
  AnyValue handler(max_depth);
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
  return reader.Parse<kFlags>(input, handler).Code();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t depth = 1 + (data[0] & 0x7f);
  const std::string_view json(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool valid = polybus::text::is_valid_json(json, depth);
  // A NUL is never valid (RapidJSON's stream would end there).
  if (json.find('\0') != std::string_view::npos) {
    FUZZ_CHECK(!valid);
    return 0;
  }
  // RapidJSON skips any of a BOM's bytes at the start; the scanner refuses a BOM.
  const auto first = json.empty() ? 0 : static_cast<unsigned char>(json.front());
  if (first == 0xEF || first == 0xBB || first == 0xBF) {
    FUZZ_CHECK(!valid);
    return 0;
  }
  const auto verdict = rapidjson_verdict(json, depth);
  // A number past a double's range: RapidJSON refuses it, JSON does not.
  if (verdict == rapidjson::kParseErrorNumberTooBig) return 0;
  FUZZ_CHECK(valid == (verdict == rapidjson::kParseErrorNone));
  return 0;
}
