// SPDX-License-Identifier: Apache-2.0
// What `polybus bench` runs against: a URL as given, or broker:NAME[?OPTIONS], an in-process test
// broker started for the command.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "polybus/testing.hpp"

namespace polybus::cli {

struct Target {
  std::string label, url;
  bool in_process = false;
};
// broker:NAME starts an in-process test broker (kept in `brokers` until the command ends).
// Throws UsageError for an unknown NAME.
Target resolve_target(const std::string& given,
                      std::vector<std::unique_ptr<testing::TestBroker>>& brokers);

}  // namespace polybus::cli
