// SPDX-License-Identifier: Apache-2.0
// detail::InplaceFunction: calls, moves and destroys its callable exactly once, kept inline.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "polybus/adapter/inplace_function.hpp"

using polybus::detail::InplaceFunction;

TEST_CASE("inplace function: calls, moves and destroys what it holds exactly once", "[inplace]") {
  auto alive = std::make_shared<int>(7);
  std::weak_ptr<int> watch = alive;
  std::string seen;
  {
    InplaceFunction<int(const std::string&), 64> f = [held = std::move(alive),
                                                      &seen](const std::string& s) {
      seen += s;
      return *held;
    };
    REQUIRE(f);
    CHECK(f("a") == 7);
    InplaceFunction<int(const std::string&), 64> g = std::move(f);
    CHECK_FALSE(f);  // NOLINT: moved-from is empty, as the class promises
    CHECK(g("b") == 7);
    CHECK_FALSE(watch.expired());
    InplaceFunction<int(const std::string&), 64> h;
    CHECK_FALSE(h);
    h = std::move(g);
    CHECK(h("c") == 7);
    h = nullptr;  // destroys the callable now
    CHECK(watch.expired());
  }
  CHECK(seen == "abc");
}

TEST_CASE("inplace function: rvalue arguments reach the callable as rvalues", "[inplace]") {
  std::string taken;
  InplaceFunction<void(std::string), 32> f = [&taken](std::string s) { taken = std::move(s); };
  std::string big(100, 'x');
  f(std::move(big));
  CHECK(taken.size() == 100);
}
