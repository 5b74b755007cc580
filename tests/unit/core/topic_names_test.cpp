// SPDX-License-Identifier: Apache-2.0
// TopicNames: a client's publish topics, each kept once and shared, so that a publish copies no
// topic; bounded in count and in length. TopicName: reads as the string it shares.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "core/client/src/topic_names.hpp"

using polybus::TopicName;
using polybus::detail::TopicNames;

namespace {
// Longer than a string's inline storage: a copy of it would allocate.
const std::string kLong = "orders.created.v1.from-the-checkout-service";
}  // namespace

TEST_CASE("topic names: every publish to a topic shares one string", "[topic_names]") {
  TopicNames names;
  const TopicName first = names.name(kLong);
  const TopicName second = names.name(std::string(kLong));  // another string, the same name
  CHECK(first.str() == kLong);
  REQUIRE(first.shared() != nullptr);
  CHECK(first.shared() == second.shared());
  CHECK(names.name("other").shared() != first.shared());
  CHECK(names.name("other").str() == "other");
}

TEST_CASE("topic names: past the bound of names, or of length, a name is not kept",
          "[topic_names]") {
  TopicNames names;
  for (std::size_t i = 0; i < TopicNames::kMaxNames; ++i) names.name("t" + std::to_string(i));
  const std::string late = "one-more-topic-than-the-bound-keeps";
  const TopicName a = names.name(late), b = names.name(late);
  CHECK(a.str() == late);
  CHECK(b.str() == late);
  CHECK(a.shared() != b.shared());  // a name each, none kept
  // A name kept before the bound is still shared.
  CHECK(names.name("t0").shared() == names.name("t0").shared());

  TopicNames fresh;
  const std::string huge(TopicNames::kMaxKeptLength + 1, 'x');
  CHECK(fresh.name(huge).shared() != fresh.name(huge).shared());
  const std::string largest(TopicNames::kMaxKeptLength, 'y');
  CHECK(fresh.name(largest).shared() == fresh.name(largest).shared());
}

TEST_CASE("topic names: callers on many threads get the same name", "[topic_names]") {
  TopicNames names;
  const TopicName expected = names.name(kLong);
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);  // not vector<bool>: its bits share bytes between threads
  for (std::size_t t = 0; t < same.size(); ++t)
    threads.emplace_back([&, t] {
      bool all = true;
      for (int i = 0; i < 1000; ++i) {
        all = all && names.name(kLong).shared() == expected.shared();
        names.name("thread-" + std::to_string(t) + "-" + std::to_string(i % 10));
      }
      same[t] = all ? 1 : 0;
    });
  for (auto& thread : threads) thread.join();
  for (int s : same) CHECK(s == 1);
}

TEST_CASE("topic name: reads as its string, empty when made empty or moved from", "[topic_names]") {
  TopicName name(kLong);
  const std::string& as_string = name;
  const std::string_view as_view = name;
  CHECK(as_string == kLong);
  CHECK(as_view == kLong);
  CHECK(name.size() == kLong.size());
  CHECK(name == TopicName(kLong));  // equal by value, not only when shared
  CHECK(name != TopicName("other"));
  TopicName taken = std::move(name);
  CHECK(taken.str() == kLong);
  CHECK(name.empty());  // NOLINT(bugprone-use-after-move): moved from reads as empty
  CHECK(name.str().empty());
  CHECK(TopicName().empty());
  CHECK(TopicName().shared() == nullptr);
}
