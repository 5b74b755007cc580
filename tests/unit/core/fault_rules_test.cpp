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

TEST_CASE("fault rules: an error's text read as a status and the rest", "[faults]") {
  using polybus::testing::fault_status;
  CHECK(fault_status("503 overloaded").status == 503);
  CHECK(fault_status("503 overloaded").text == "overloaded");
  CHECK(fault_status("404").status == 404);
  CHECK(fault_status("404").text.empty());
  CHECK(fault_status("1000 far").status == 1000);
  // Not a status: the fallback and the whole text.
  for (const char* text : {"E_FIN_FAILED FIN failed", "50 short", "12345 long", "503x", ""}) {
    CHECK(fault_status(text, 500).status == 500);
    CHECK(fault_status(text, 500).text == text);
  }
  CHECK(fault_status("boom", 418).status == 418);
}

TEST_CASE("fault rules: a hold is released when its rule is removed or the rules are cleared",
          "[faults]") {
  using polybus::testing::FaultRule;
  using polybus::testing::FaultRules;
  using polybus::testing::parse_fault_rule;
  const FaultRule hold = parse_fault_rule("unit=message,hold");
  CHECK(hold.action == FaultRule::Action::hold);
  FaultRules rules;
  const auto first = rules.add(hold);
  const auto second = rules.add(parse_fault_rule("unit=FIN,every,hold"));
  const auto fired = rules.fire({"message", "t", "c", 1});
  REQUIRE(fired);
  CHECK(fired->id == first);  // the copy names its rule
  int released_first = 0, released_second = 0;
  rules.when_removed(first, [&] { ++released_first; });
  rules.when_removed(second, [&] { ++released_second; });
  CHECK(released_first == 0);
  CHECK(rules.remove(first));
  CHECK(released_first == 1);
  CHECK(released_second == 0);
  rules.when_removed(first, [&] { ++released_first; });  // gone already: at once
  CHECK(released_first == 2);
  rules.clear();
  CHECK(released_second == 1);
  {
    FaultRules dropped;
    const auto id = dropped.add(hold);
    dropped.when_removed(id, [&] { ++released_second; });
  }  // destroyed with the rule in force: not run
  CHECK(released_second == 1);
}

TEST_CASE("fault rules: a hold that fires again on a held connection waits with one callback",
          "[faults]") {
  using polybus::testing::FaultRules;
  using polybus::testing::parse_fault_rule;
  FaultRules rules;
  const auto id = rules.add(parse_fault_rule("unit=PUB,every,hold"));
  int connection_7 = 0, connection_8 = 0, unnamed = 0;
  for (int firing = 0; firing < 1000; ++firing) {
    REQUIRE(rules.fire({"PUB", "t", {}, 7}));
    rules.when_removed(id, 7, [&] { ++connection_7; });
  }
  rules.when_removed(id, 8, [&] { ++connection_8; });
  rules.when_removed(id, [&] { ++unnamed; });
  rules.when_removed(id, [&] { ++unnamed; });  // no connection said: each is kept
  CHECK(rules.remove(id));
  CHECK(connection_7 == 1);
  CHECK(connection_8 == 1);
  CHECK(unnamed == 2);
}
