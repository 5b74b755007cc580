// SPDX-License-Identifier: Apache-2.0
// ArrivalClock: within a read's scope "now" is the read's time, on that thread only;
// outside any scope it is the clock.
#include <catch2/catch.hpp>

#include <thread>

#include "polybus/adapter/arrival_clock.hpp"

using polybus::ArrivalClock;
using polybus::Clock;

TEST_CASE("ArrivalClock gives a read's time within its scope and the clock outside",
          "[unit][core]") {
  const auto before = Clock::now();
  CHECK(ArrivalClock::now() >= before);
  const Clock::time_point arrived = before - std::chrono::hours(1);  // unmistakably not now
  {
    ArrivalClock::Scope scope(arrived);
    CHECK(ArrivalClock::now() == arrived);
    {
      const Clock::time_point inner = arrived + std::chrono::seconds(1);
      ArrivalClock::Scope nested(inner);  // a read handled within another's handler
      CHECK(ArrivalClock::now() == inner);
    }
    CHECK(ArrivalClock::now() == arrived);
    Clock::time_point elsewhere{};
    std::thread([&] { elsewhere = ArrivalClock::now(); }).join();
    CHECK(elsewhere >= before);  // another thread reads its own clock
  }
  CHECK(ArrivalClock::now() >= before);
}
