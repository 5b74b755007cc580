// SPDX-License-Identifier: Apache-2.0
// nsq::InFlightWindow: which unanswered messages the RDY check holds against nsqd.
#include <catch2/catch.hpp>

#include <string>

#include "nsq/src/in_flight_window.hpp"

using polybus::Clock;
using polybus::nsq::InFlightWindow;
using std::chrono::milliseconds;

namespace {

// A 16-byte id as nsqd writes them (hex digits).
std::string id_of(std::uint64_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string id(16, '0');
  for (int i = 15; i >= 0 && n; --i, n >>= 4) id[i] = digits[n & 15];
  return id;
}

const auto t0 = Clock::time_point(std::chrono::hours(1));

}  // namespace

TEST_CASE("nsq in-flight window: recent arrivals count until answered", "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));  // slices of 100 ms
  window.arrived(id_of(1), t0);
  window.arrived(id_of(2), t0 + milliseconds(10));
  window.arrived(id_of(3), t0 + milliseconds(250));
  CHECK(window.recent(t0 + milliseconds(300)) == 3);
  window.answered(id_of(2));
  CHECK(window.recent(t0 + milliseconds(300)) == 2);
  window.answered(id_of(1));
  CHECK(window.recent(t0 + milliseconds(300)) == 1);
  // A second answer for an id retires nothing, and neither does an id never seen.
  window.answered(id_of(1));
  window.answered(id_of(99));
  CHECK(window.recent(t0 + milliseconds(300)) == 1);
  CHECK(window.tracked() == 1);
}

TEST_CASE(
    "nsq in-flight window: a message older than 13/16 of msg_timeout no longer counts "
    "(nsqd may have timed it out and sent another)",
    "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));
  window.arrived(id_of(1), t0);
  CHECK(window.recent(t0 + milliseconds(1200)) == 1);  // slice 12 of 16: still counted
  CHECK(window.recent(t0 + milliseconds(1350)) == 0);  // slice 13: left out
  window.arrived(id_of(2), t0 + milliseconds(1350));
  CHECK(window.recent(t0 + milliseconds(1350)) == 1);
  // Its late answer touches nothing of the newer slices.
  window.answered(id_of(1));
  CHECK(window.recent(t0 + milliseconds(1350)) == 1);
  // Far later: everything has aged out, whatever was answered.
  CHECK(window.recent(t0 + milliseconds(100000)) == 0);
}

TEST_CASE(
    "nsq in-flight window: an answer to a timed-out copy retires its redelivery, which "
    "nsqd finished by id",
    "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));
  window.arrived(id_of(7), t0);                        // copy 1, held by the handler
  window.arrived(id_of(7), t0 + milliseconds(1700));   // nsqd timed it out: copy 2
  CHECK(window.recent(t0 + milliseconds(1700)) == 1);  // one copy counted, not two
  window.answered(id_of(7));                           // the handler finishes copy 1
  CHECK(window.recent(t0 + milliseconds(1700)) == 0);  // nsqd finished copy 2: RDY is free
  window.arrived(id_of(8), t0 + milliseconds(1710));
  CHECK(window.recent(t0 + milliseconds(1710)) == 1);
  window.answered(id_of(7));  // copy 2's own answer (E_FIN_FAILED at nsqd) retires nothing
  CHECK(window.recent(t0 + milliseconds(1710)) == 1);
}

TEST_CASE("nsq in-flight window: an id sent again while its copy is still counted counts again",
          "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));
  for (int i = 0; i < 10; ++i) window.arrived(id_of(5), t0 + milliseconds(i));
  CHECK(window.recent(t0 + milliseconds(10)) == 10);  // a flood of one id is still a flood
}

TEST_CASE("nsq in-flight window: a flood within the window is counted whole", "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(60000));
  for (int i = 0; i < 5000; ++i) window.arrived(id_of(i), t0 + milliseconds(i));
  CHECK(window.recent(t0 + milliseconds(5000)) == 5000);
  CHECK(window.tracked() == 5000);
  for (int i = 0; i < 5000; ++i) window.answered(id_of(i));
  CHECK(window.recent(t0 + milliseconds(5000)) == 0);
  CHECK(window.tracked() == 0);
}

TEST_CASE(
    "nsq in-flight window: a long stream keeps its table's size (no growth per message), "
    "including ids never answered",
    "[nsq][in_flight]") {
  InFlightWindow window;
  window.reset(milliseconds(1600));
  std::size_t warmed = 0;  // the room after the first msg_timeout's worth of stale ids
  // RDY 8: eight in flight at any time, answered in order; one message in 100 is never answered
  // (its handler kept it past msg_timeout and nsqd sent it again under another attempt).
  std::uint64_t next = 0;
  for (int step = 0; step < 200000; ++step) {
    const auto now = t0 + milliseconds(step);
    window.arrived(id_of(next), now);
    if (next >= 8 && (next - 8) % 100 != 0) window.answered(id_of(next - 8));
    ++next;
    if (step == 10000) warmed = window.capacity();
    REQUIRE(window.recent(now) <= 8 + 1600 / 100 + 1);
  }
  CHECK(warmed <= 128);
  CHECK(window.capacity() == warmed);
  CHECK(window.tracked() <= window.capacity() / 2);
}

TEST_CASE("nsq in-flight window: erasing keeps every other id findable", "[nsq][in_flight]") {
  // Backward-shift deletion on a table with long probe runs: each id answered once retires
  // exactly one count, whatever the order.
  InFlightWindow window;
  window.reset(milliseconds(60000));
  constexpr int n = 3000;
  for (int i = 0; i < n; ++i) window.arrived(id_of(static_cast<std::uint64_t>(i) * 7919), t0);
  for (int i = 0; i < n; i += 2) window.answered(id_of(static_cast<std::uint64_t>(i) * 7919));
  CHECK(window.recent(t0) == n / 2);
  for (int i = 1; i < n; i += 2) window.answered(id_of(static_cast<std::uint64_t>(i) * 7919));
  CHECK(window.recent(t0) == 0);
  CHECK(window.tracked() == 0);
}

TEST_CASE("nsq in-flight window: ids as nsqd makes them spread over the table (short probes)",
          "[nsq][in_flight]") {
  // nsqd's ids: the hex of (milliseconds << 22 | node << 12 | sequence), the last digits
  // changing fastest. 2500 in flight (max_rdy_count), 300 a millisecond.
  InFlightWindow window;
  window.reset(milliseconds(60000));
  const std::uint64_t ms = 1'700'000'000'000ull;
  for (std::uint64_t i = 0; i < 2500; ++i)
    window.arrived(id_of(((ms + i / 300) << 22) | (1u << 12) | (i % 300)), t0);
  REQUIRE(window.tracked() == 2500);
  INFO("capacity " << window.capacity());
  CHECK(window.longest_probe() <= 32);  // the mix that kept the fast digits high: over 1000
  for (std::uint64_t i = 0; i < 2500; i += 2)
    window.answered(id_of(((ms + i / 300) << 22) | (1u << 12) | (i % 300)));
  CHECK(window.tracked() == 1250);
  CHECK(window.recent(t0) == 1250);
}
