// SPDX-License-Identifier: Apache-2.0
// Fault rules for the test brokers: what matches, when a rule fires, the same faults from the
// same seed, and the text form polybus broker takes.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "polybus/fault_rules.hpp"

using polybus::testing::FaultRule;
using polybus::testing::FaultRules;
using polybus::testing::parse_fault_rule;

namespace {

// Which of `count` FINs on connection 1 fire.
std::vector<int> firing(FaultRules& rules, int count, std::string_view unit = "FIN") {
  std::vector<int> fired;
  for (int i = 1; i <= count; ++i)
    if (rules.fire({unit, "t", "c", 1})) fired.push_back(i);
  return fired;
}

}  // namespace

TEST_CASE("fault rules: once, nth, first n and every fire on the units they count",
          "[fault_rules]") {
  FaultRules rules;
  CHECK(rules.empty());
  CHECK(firing(rules, 3).empty());
  FaultRule rule = parse_fault_rule("unit=FIN,nth=3,error=E_FIN_FAILED FIN failed");
  const auto id = rules.add(rule);
  CHECK(firing(rules, 5) == std::vector<int>{3});
  CHECK(rules.fired(id) == 1);
  rules.clear();
  rule.when = FaultRule::When::once;
  rules.add(rule);
  CHECK(firing(rules, 3) == std::vector<int>{1});
  rules.clear();
  rule.when = FaultRule::When::first_n;
  rule.n = 2;
  rules.add(rule);
  CHECK(firing(rules, 4) == std::vector<int>{1, 2});
  rules.clear();
  rule.when = FaultRule::When::every;
  const auto every = rules.add(rule);
  CHECK(firing(rules, 3) == std::vector<int>{1, 2, 3});
  CHECK(firing(rules, 2, "RDY").empty());  // another unit is not counted
  CHECK(rules.remove(every));
  CHECK_FALSE(rules.remove(every));
  CHECK(rules.empty());
}

TEST_CASE("fault rules: topic, channel and connection narrow what a rule matches",
          "[fault_rules]") {
  FaultRules rules;
  FaultRule rule = parse_fault_rule("unit=*,topic=t,channel=c,connection=2,every,swallow");
  rules.add(rule);
  CHECK_FALSE(rules.fire({"FIN", "t", "c", 1}));
  CHECK_FALSE(rules.fire({"FIN", "u", "c", 2}));
  CHECK_FALSE(rules.fire({"FIN", "t", "d", 2}));
  const auto fired = rules.fire({"SUB", "t", "c", 2});
  REQUIRE(fired);
  CHECK(fired->action == FaultRule::Action::swallow);
}

TEST_CASE("fault rules: a probability from a seed gives the same faults for the same traffic",
          "[fault_rules]") {
  const FaultRule rule = parse_fault_rule("unit=FIN,probability=0.3,seed=42,duplicate");
  FaultRules first, second, other;
  first.add(rule);
  second.add(rule);
  FaultRule reseeded = rule;
  reseeded.seed = 43;
  other.add(reseeded);
  const auto a = firing(first, 200), b = firing(second, 200), c = firing(other, 200);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a.size() > 30);  // about 60 of 200
  CHECK(a.size() < 100);
}

TEST_CASE("fault rules: after holds a rule back", "[fault_rules]") {
  FaultRules rules;
  rules.add(parse_fault_rule("unit=FIN,every,after=3600000,close"));
  CHECK(firing(rules, 3).empty());
}

TEST_CASE("fault rules: the text form, and what it refuses", "[fault_rules]") {
  const FaultRule rule =
      parse_fault_rule("unit=REQ,topic=orders,first=2,fatal,error=E_REQ_FAILED REQ failed, badly");
  CHECK(rule.unit == "REQ");
  CHECK(rule.topic == "orders");
  CHECK(rule.when == FaultRule::When::first_n);
  CHECK(rule.n == 2);
  CHECK(rule.fatal);
  CHECK(rule.error == "E_REQ_FAILED REQ failed, badly");  // error= takes the rest
  CHECK(parse_fault_rule("unit=SUB,delay=2000").delay == std::chrono::milliseconds(2000));
  CHECK(parse_fault_rule("unit=message,reset").action == FaultRule::Action::reset);
  for (const char* bad : {"swallow", "unit=FIN", "unit=FIN,nth=x,close", "unit=FIN,nth=0,close",
                          "unit=FIN,probability=2,close", "unit=FIN,close,swallow",
                          "unit=FIN,colour=red,close", "unit=FIN,error="})
    CHECK_THROWS_AS(parse_fault_rule(bad), std::invalid_argument);
}

TEST_CASE("fault rules: every rule that matches counts a unit, and the first to fire answers",
          "[fault_rules]") {
  FaultRules rules;
  const auto swallow = rules.add(parse_fault_rule("unit=FIN,nth=2,swallow"));
  const auto duplicate = rules.add(parse_fault_rule("unit=FIN,nth=3,duplicate"));
  const auto both = rules.add(parse_fault_rule("unit=FIN,nth=2,close"));  // shadowed by the first
  CHECK_FALSE(rules.fire({"FIN", "t", "c", 1}));
  const auto second = rules.fire({"FIN", "t", "c", 1});
  REQUIRE(second);
  CHECK(second->action == FaultRule::Action::swallow);
  const auto third = rules.fire({"FIN", "t", "c", 1});
  REQUIRE(third);
  CHECK(third->action == FaultRule::Action::duplicate);
  CHECK(rules.fired(swallow) == 1);
  CHECK(rules.fired(duplicate) == 1);
  CHECK(rules.fired(both) == 0);
}
