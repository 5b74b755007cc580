// SPDX-License-Identifier: Apache-2.0
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "polybus/adapter/clock_timer.hpp"
#include "polybus/manual_clock.hpp"

using polybus::ClockTimer;
using polybus::ManualClock;
using namespace std::chrono_literals;

TEST_CASE("manual clock: advance runs what comes due in order, at its due time", "[clock]") {
  ManualClock clock;
  const auto start = clock.now();
  std::vector<std::pair<int, ManualClock::duration>> ran;
  const auto note = [&](int which) { ran.emplace_back(which, clock.now() - start); };
  clock.schedule(start + 30s, [&] { note(3); });
  clock.schedule(start + 10s, [&] { note(1); });
  clock.schedule(start + 10s, [&] { note(2); });  // a tie: in the order scheduled
  const auto late = clock.schedule(start + 90s, [&] { note(9); });
  CHECK(clock.pending() == 4);
  CHECK(clock.next_due() == start + 10s);
  clock.advance(9s);
  CHECK(ran.empty());
  CHECK(clock.now() == start + 9s);
  clock.advance(51s);
  REQUIRE(ran.size() == 3);
  CHECK(ran[0] == std::make_pair(1, ManualClock::duration(10s)));
  CHECK(ran[1] == std::make_pair(2, ManualClock::duration(10s)));
  CHECK(ran[2] == std::make_pair(3, ManualClock::duration(30s)));
  CHECK(clock.now() == start + 60s);
  CHECK(clock.cancel(late));
  CHECK_FALSE(clock.cancel(late));
  clock.advance(1h);
  CHECK(ran.size() == 3);
  CHECK(clock.pending() == 0);
  CHECK(clock.next_due() == ManualClock::time_point::max());
}

TEST_CASE("manual clock: what a callback schedules within the span runs in the same advance",
          "[clock]") {
  ManualClock clock;
  const auto start = clock.now();
  std::vector<ManualClock::duration> ran;
  std::function<void()> again = [&] {
    ran.push_back(clock.now() - start);
    if (ran.size() < 5) clock.schedule(clock.now() + 1s, again);
  };
  clock.schedule(start + 1s, again);
  clock.advance(3500ms);
  CHECK(ran == std::vector<ManualClock::duration>{1s, 2s, 3s});
  clock.advance(0s);
  CHECK(ran.size() == 3);
  clock.advance_to(start);  // in the past: nothing moves back
  CHECK(clock.now() == start + 3500ms);
  clock.advance(10s);
  CHECK(ran.size() == 5);
}

TEST_CASE("manual clock: one already due runs at the next advance, never from schedule",
          "[clock]") {
  ManualClock clock;
  bool ran = false;
  clock.schedule(clock.now() - 1s, [&] { ran = true; });
  CHECK_FALSE(ran);
  clock.advance(0s);
  CHECK(ran);
}

TEST_CASE("manual clock: an advance from inside its own callback is refused", "[clock]") {
  ManualClock clock;
  std::string refused;
  clock.schedule(clock.now() + 1s, [&] {
    try {
      clock.advance(1s);
    } catch (const std::logic_error& e) {
      refused = e.what();
    }
  });
  clock.advance(2s);
  CHECK_THAT(refused, Catch::Contains("callback of the same clock"));
  CHECK_THROWS_AS(clock.advance(-1s), std::invalid_argument);
}

TEST_CASE("clock timer: on a manual clock the handler runs on its io thread before advance returns",
          "[clock]") {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  auto clock = std::make_shared<ManualClock>();
  std::atomic<bool> on_io_thread{false};
  std::atomic<int> fired{0};
  std::error_code first_result = asio::error::would_block;
  std::unique_ptr<ClockTimer> timer;
  std::promise<void> armed;
  asio::post(io, [&] {
    timer = std::make_unique<ClockTimer>(io, clock);
    timer->expires_after(60s);
    timer->async_wait([&](std::error_code ec) {
      first_result = ec;
      on_io_thread = io.get_executor().running_in_this_thread();
      ++fired;
    });
    armed.set_value();
  });
  armed.get_future().wait();
  clock->advance(59s);
  CHECK(fired == 0);
  clock->advance(1s);
  CHECK(fired == 1);  // before advance returned
  CHECK(on_io_thread);
  CHECK(first_result == std::error_code{});

  // Cancelled, re-armed and destroyed: aborted handlers, and nothing left on the clock.
  std::promise<std::vector<std::error_code>> results;
  asio::post(io, [&] {
    auto codes = std::make_shared<std::vector<std::error_code>>();
    timer->expires_after(5s);
    timer->async_wait([codes](std::error_code ec) { codes->push_back(ec); });
    timer->expires_after(10s);  // cancels the first wait
    timer->async_wait([codes](std::error_code ec) { codes->push_back(ec); });
    timer.reset();  // cancels the second
    asio::post(io, [codes, &results] { results.set_value(*codes); });
  });
  const auto codes = results.get_future().get();
  REQUIRE(codes.size() == 2);
  CHECK(codes[0] == asio::error::operation_aborted);
  CHECK(codes[1] == asio::error::operation_aborted);
  CHECK(clock->pending() == 0);
  clock->advance(1h);
  work.reset();
  io_thread.join();
}

TEST_CASE("clock timer: without a manual clock it is the real steady timer", "[clock]") {
  asio::io_context io;
  ClockTimer timer(io);
  timer.expires_after(1ms);
  std::error_code result = asio::error::would_block;
  timer.async_wait([&](std::error_code ec) { result = ec; });
  io.run_for(10s);
  CHECK(result == std::error_code{});
  CHECK(timer.expiry() <= std::chrono::steady_clock::now());
}
