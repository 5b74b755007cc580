// SPDX-License-Identifier: Apache-2.0
// The test brokers' fault rules in their text form, as `polybus broker nsqd --fault` and the
// admin API's POST /faults take them from anyone: parse_fault_rule on the whole input, then the
// rule in FaultRules against a few units. Checks: only std::invalid_argument escapes; a parsed
// rule has a unit, counts from 1 and a probability from 0 to 1; an added rule fires at most as
// often as it matched, and once for `once`.
#include <stdexcept>

#include "fuzz_util.hpp"
#include "polybus/fault_rules.hpp"

using polybus::testing::FaultRule;
using polybus::testing::FaultRules;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  FaultRule rule;
  try {
    rule = polybus::testing::parse_fault_rule(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  FUZZ_CHECK(!rule.unit.empty());
  FUZZ_CHECK(rule.probability >= 0.0 && rule.probability <= 1.0);
  if (rule.when == FaultRule::When::nth || rule.when == FaultRule::When::first_n)
    FUZZ_CHECK(rule.n >= 1);
  if (rule.action == FaultRule::Action::error) FUZZ_CHECK(!rule.error.empty());
  rule.after = std::chrono::milliseconds(0);  // the units below come at once
  FaultRules rules;
  const auto id = rules.add(rule);
  std::uint64_t fired = 0;
  for (int i = 0; i < 8; ++i)
    fired += rules.fire({rule.unit, rule.topic, rule.channel, rule.connection}).has_value();
  FUZZ_CHECK(fired == rules.fired(id));
  FUZZ_CHECK(fired <= 8);
  if (rule.when == FaultRule::When::once) FUZZ_CHECK(fired == 1);
  if (rule.when == FaultRule::When::every) FUZZ_CHECK(fired == 8);
  return 0;
}
