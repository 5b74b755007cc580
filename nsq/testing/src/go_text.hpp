// SPDX-License-Identifier: Apache-2.0
// Text formatted the way nsqd's Go code formats it, so that error frames and JSON bodies match
// nsqd's byte for byte.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace polybus::nsq::testing::detail {

// fmt's %q of a string (strconv.Quote): double quotes, C-like escapes, \xNN for bytes that are not
// printable ASCII or valid UTF-8. Valid non-ASCII UTF-8 is kept as is, except the C1 controls.
std::string go_quote(std::string_view text);

// A JSON string as encoding/json writes it, quotes included: besides the JSON escapes it escapes
// <, > and & as \u003c, \u003e and \u0026.
std::string go_json_string(std::string_view text);
// A []string as encoding/json writes a non-nil one: ["a","b"], [] when empty.
std::string go_json_string_array(const std::vector<std::string>& values);

// A time.Duration as its String() writes it: "0s", "350ms", "1.5s", "2m3.25s", "1h0m0s".
std::string go_duration(std::chrono::nanoseconds duration);

// fmt's %-<width>s and %-<width>d: left-aligned, padded with spaces to `width`.
std::string go_pad(std::string_view text, std::size_t width);

}  // namespace polybus::nsq::testing::detail
