// SPDX-License-Identifier: Apache-2.0
// The JSON of OMB's worker protocol: written as OMB's Java worker writes it (Jackson's default
// pretty printer: `{\n  "key" : value,\n ...}`, arrays of scalars on one line), so that a reader
// comparing bytes sees the same; read from any valid JSON, bounded in depth.
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus::bench::worker {

// A JSON string literal of `text` (quotes and escapes added).
std::string json_string(std::string_view text);
// An object of these fields, in order; each value is already JSON.
std::string jackson_object(const std::vector<std::pair<std::string, std::string>>& fields);
// An array of strings on one line: [ "a", "b" ], or [ ] when empty.
std::string jackson_string_array(const std::vector<std::string>& items);

// Parses `body` as JSON nested at most `max_depth` deep. Throws std::runtime_error naming `what`
// (the endpoint) and where the text stopped being JSON.
rapidjson::Document parse_json(std::string_view body, std::size_t max_depth, const char* what);

}  // namespace polybus::bench::worker
