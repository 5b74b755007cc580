// SPDX-License-Identifier: Apache-2.0
#include "worker_json.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>

namespace polybus::bench::worker {

std::string json_string(std::string_view text) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string jackson_object(const std::vector<std::pair<std::string, std::string>>& fields) {
  if (fields.empty()) return "{ }";
  std::string out = "{\n";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    out += "  " + json_string(fields[i].first) + " : " + fields[i].second;
    out += i + 1 < fields.size() ? ",\n" : "\n";
  }
  return out + "}";
}

std::string jackson_string_array(const std::vector<std::string>& items) {
  if (items.empty()) return "[ ]";
  std::string out = "[ ";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
  return out + " ]";
}

rapidjson::Document parse_json(std::string_view body, std::size_t max_depth, const char* what) {
  // The depth first, outside strings, so that no parser recurses on a hostile nesting.
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw std::runtime_error(std::string(what) + ": JSON nested deeper than " +
                                 std::to_string(max_depth) + " at byte " + std::to_string(i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  rapidjson::Document document;
  document.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(body.data(),
                                                                                     body.size());
  if (document.HasParseError())
    throw std::runtime_error(std::string(what) + ": not JSON at byte " +
                             std::to_string(document.GetErrorOffset()) + ": " +
                             rapidjson::GetParseError_En(document.GetParseError()));
  return document;
}

}  // namespace polybus::bench::worker
