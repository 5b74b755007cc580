// SPDX-License-Identifier: Apache-2.0
#include "go_query.hpp"

#include "polybus/text/text.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// As Go's url.QueryUnescape: %XX and '+' as a space.
bool unescape(std::string_view text, std::string& out) {
  return polybus::text::percent_decode(text, out, true) == polybus::text::PercentError::none;
}

}  // namespace

std::optional<std::string> query_value(std::string_view query, std::string_view key, bool& valid) {
  valid = true;
  std::optional<std::string> found;
  std::string decoded_key;
  std::string decoded_value;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    if (pair.empty()) continue;
    if (pair.find(';') != std::string_view::npos) {
      valid = false;  // Go 1.17+ refuses semicolons as separators
      return std::nullopt;
    }
    const std::size_t equals = pair.find('=');
    const std::string_view raw_value =
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
    if (!unescape(pair.substr(0, equals), decoded_key) || !unescape(raw_value, decoded_value)) {
      valid = false;
      return std::nullopt;
    }
    if (!found && decoded_key == key) found = decoded_value;
  }
  return found;
}

}  // namespace polybus::nsq::testing::detail
