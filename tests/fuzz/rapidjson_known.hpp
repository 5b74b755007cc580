// SPDX-License-Identifier: Apache-2.0
// Detects the input of known finding 5 (README.md), for the fuzzers that read QuickIO callback
// bodies: a number RapidJSON 1.1.0's default parsing reads as infinity (above DBL_MAX, and some
// just below it such as 1.7976931348623158e308) passes is_valid_json, but re-serializing it
// fails, and parse_callback_body keeps the Writer's truncated output as data_json.
#pragma once

#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cmath>
#include <string_view>

namespace polybus::fuzz {

inline bool rapidjson_reads_infinity(std::string_view json) {
  struct Handler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
    bool infinite = false;
    bool Double(double d) {
      if (std::isinf(d)) infinite = true;
      return true;
    }
  } handler;
  rapidjson::MemoryStream stream(json.data(), json.size());
  rapidjson::Reader reader;
  reader.Parse<rapidjson::kParseIterativeFlag>(stream, handler);
  return handler.infinite;
}

}  // namespace polybus::fuzz
