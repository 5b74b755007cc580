// SPDX-License-Identifier: Apache-2.0
// Query strings read the way nsqlookupd's Go code reads them (url.ParseQuery).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace polybus::nsq::testing::detail {

// url.ParseQuery's value for `key` (the first one), percent- and '+'-decoded. nullopt when the key
// is absent; false in `valid` when the query is malformed (Go answers 400 INVALID_REQUEST).
std::optional<std::string> query_value(std::string_view query, std::string_view key, bool& valid);

}  // namespace polybus::nsq::testing::detail
