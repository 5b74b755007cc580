// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "polybus/adapter/registry.hpp"
#include "polybus/backoff.hpp"
#include "polybus/options.hpp"

using namespace polybus;
using namespace std::chrono_literals;

TEST_CASE("exponential backoff doubles up to its cap", "[backoff]") {
  auto b = Backoff::exponential(100ms, 1000ms);
  CHECK(b.delay(1) == 100ms);
  CHECK(b.delay(2) == 200ms);
  CHECK(b.delay(4) == 800ms);
  CHECK(b.delay(5) == 1000ms);
  CHECK(b.delay(1000000) == 1000ms);
}

TEST_CASE("full jitter stays within zero and the exponential value", "[backoff]") {
  auto b = Backoff::full_jitter(100ms, 1000ms);
  for (std::uint32_t attempt = 1; attempt < 20; ++attempt) {
    auto cap = Backoff::exponential(100ms, 1000ms).delay(attempt);
    for (int i = 0; i < 50; ++i) {
      auto d = b.delay(attempt);
      CHECK(d >= 0ms);
      CHECK(d <= cap);
    }
  }
}

TEST_CASE("exponential jitter stays within its fraction and the cap", "[backoff]") {
  auto b = Backoff::exponential_jitter(1000ms, 8000ms, 0.2);
  for (int i = 0; i < 100; ++i) {
    auto d = b.delay(2);
    CHECK(d >= 1600ms);
    CHECK(d <= 2400ms);
    CHECK(b.delay(10) <= 8000ms);
  }
}

TEST_CASE("a custom backoff function is used as given and the state resets", "[backoff]") {
  BackoffState state(
      Backoff::custom([](std::uint32_t n) { return std::chrono::milliseconds(n * 7); }));
  CHECK(state.next() == 7ms);
  CHECK(state.next() == 14ms);
  CHECK(state.attempts() == 2);
  state.reset();
  CHECK(state.next() == 7ms);
}

TEST_CASE("backoff comes from the reconnect options", "[backoff]") {
  auto opts = ResolvedOptions::resolve(
      core_option_table(), Options{{"reconnect_initial", "50ms"}, {"reconnect_max", "400ms"}}, "t");
  auto b = Backoff::from_options(opts);
  // The default policy jitters by +-20% around doubling, never past the cap.
  for (int i = 0; i < 100; ++i) {
    CHECK(b.delay(1) >= 40ms);
    CHECK(b.delay(1) <= 60ms);
    CHECK(b.delay(10) >= 320ms);
    CHECK(b.delay(10) <= 400ms);
  }
  auto exact =
      Backoff::from_options(ResolvedOptions::resolve(core_option_table(),
                                                     Options{{"reconnect_initial", "50ms"},
                                                             {"reconnect_max", "400ms"},
                                                             {"reconnect_backoff", "exponential"}},
                                                     "t"));
  CHECK(exact.delay(1) == 50ms);
  CHECK(exact.delay(10) == 400ms);
}
