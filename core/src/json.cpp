// JSON validity with a depth bound, shared by every codec that checks JSON it did not parse
// itself (QuickIO's event data, the CloudEvents envelope's JSON data). Iterative parsing: deep
// hostile input cannot overflow the stack.
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "polybus/adapter/text.hpp"

namespace polybus::text {

namespace {

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

}  // namespace

bool is_valid_json(std::string_view json, std::size_t max_depth) {
  // RapidJSON's streams take '\0' for the end of input; a raw NUL is never valid JSON, so it is
  // refused first (otherwise "null\0junk" would pass).
  if (json.find('\0') != std::string_view::npos) return false;
  rapidjson::MemoryStream memory(json.data(), json.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(memory);
  rapidjson::Reader reader;
  AnyValue handler(max_depth);
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
  return !reader.Parse<kFlags>(input, handler).IsError();
}

}  // namespace polybus::text
