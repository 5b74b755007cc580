// nsq::InFlightWindow: which unanswered messages the RDY check holds against nsqd.
#include <catch2/catch.hpp>

#include "nsq/src/in_flight_window.hpp"

using polybus::Clock;
using polybus::nsq::InFlightWindow;
using std::chrono::milliseconds;

TEST_CASE("nsq in-flight window: recent arrivals count until answered", "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));  // slices of 100 ms
  const auto t0 = Clock::time_point(std::chrono::hours(1));
  window.arrived(t0);
  window.arrived(t0 + milliseconds(10));
  window.arrived(t0 + milliseconds(250));
  CHECK(window.recent(t0 + milliseconds(300)) == 3);
  window.answered(t0 + milliseconds(10));
  CHECK(window.recent(t0 + milliseconds(300)) == 2);
  window.answered(t0);
  CHECK(window.recent(t0 + milliseconds(300)) == 1);
  // An answer for a slice that holds nothing more changes nothing (counts never go below 0).
  window.answered(t0 + milliseconds(20));
  CHECK(window.recent(t0 + milliseconds(300)) == 1);
}

TEST_CASE("nsq in-flight window: a message older than 13/16 of msg_timeout no longer counts "
          "(nsqd may have timed it out and sent another)", "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));
  const auto t0 = Clock::time_point(std::chrono::hours(1));
  window.arrived(t0);
  CHECK(window.recent(t0 + milliseconds(1200)) == 1);  // slice 12 of 16: still counted
  CHECK(window.recent(t0 + milliseconds(1350)) == 0);  // slice 13: left out
  window.arrived(t0 + milliseconds(1350));
  CHECK(window.recent(t0 + milliseconds(1350)) == 1);
  // Its late answer touches nothing of the newer slices.
  window.answered(t0);
  CHECK(window.recent(t0 + milliseconds(1350)) == 1);
  // Far later: everything has aged out, whatever was answered.
  CHECK(window.recent(t0 + milliseconds(100000)) == 0);
}

TEST_CASE("nsq in-flight window: a flood within the window is counted whole", "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(60000));
  const auto t0 = Clock::time_point(std::chrono::hours(1));
  for (int i = 0; i < 5000; ++i) window.arrived(t0 + milliseconds(i));
  CHECK(window.recent(t0 + milliseconds(5000)) == 5000);
}
