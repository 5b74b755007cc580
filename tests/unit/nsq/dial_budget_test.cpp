// SPDX-License-Identifier: Apache-2.0
// nsq::DialBudget: the descriptors discovery may hold for dials beyond its usual bounds, half the
// soft descriptor limit for the whole process, each unit given back once.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <vector>

#include "nsq/src/dial_budget.hpp"

using polybus::nsq::DialBudget;
using polybus::nsq::WidenedDial;

TEST_CASE("nsq: the dial budget is half the soft descriptor limit and each unit goes back once",
          "[unit][nsq]") {
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(200, saved.rlim_max);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  const std::size_t size = static_cast<std::size_t>(lowered.rlim_cur / 2);
  CHECK(DialBudget::size() == size);
  const std::size_t before = DialBudget::taken();
  REQUIRE(before == 0);
  {
    std::vector<WidenedDial> dials;
    for (std::size_t i = 0; i < size; ++i) {
      dials.push_back(WidenedDial::take());
      REQUIRE(dials.back());
    }
    CHECK_FALSE(WidenedDial::take());  // spent: the usual bounds again
    CHECK(DialBudget::taken() == size);
    dials.front().release();
    dials.front().release();  // once only
    CHECK(DialBudget::taken() == size - 1);
    WidenedDial moved = std::move(dials.back());  // the unit goes with the move
    dials.pop_back();
    CHECK(DialBudget::taken() == size - 1);
    CHECK(moved);
  }
  CHECK(DialBudget::taken() == 0);  // every holder gone: every unit back
  setrlimit(RLIMIT_NOFILE, &saved);
}
