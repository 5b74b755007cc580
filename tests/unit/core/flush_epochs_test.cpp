// SPDX-License-Identifier: Apache-2.0
// FlushEpochs: a flush waits for exactly the publishes taken in before it, in whatever order they
// complete, and not for those after it.
#include <catch2/catch.hpp>

#include "core/client/src/flush_epochs.hpp"

using polybus::detail::FlushEpochs;

TEST_CASE("flush epochs: nothing pending completes at once", "[flush]") {
  FlushEpochs epochs;
  bool ran = false;
  CHECK(epochs.wait([&] { ran = true; }) == 0);
  CHECK_FALSE(ran);  // the caller completes it: `done` is not kept
  const auto e = epochs.enter();
  epochs.leave(e);
  CHECK(epochs.wait([&] { ran = true; }) == 0);
}

TEST_CASE("flush epochs: a flush waits for earlier publishes in any order, not later ones",
          "[flush]") {
  FlushEpochs epochs;
  const auto a = epochs.enter(), b = epochs.enter();
  int flushed = 0;
  REQUIRE(epochs.wait([&] { ++flushed; }) != 0);
  const auto later = epochs.enter();  // after the flush: not waited for
  epochs.leave(b);
  CHECK(flushed == 0);
  epochs.leave(a);
  CHECK(flushed == 1);
  // A second flush waits for the later one only.
  int second = 0;
  REQUIRE(epochs.wait([&] { ++second; }) != 0);
  epochs.leave(later);
  CHECK(second == 1);
  CHECK(flushed == 1);
}

TEST_CASE("flush epochs: flushes overlap, each released by its own publishes", "[flush]") {
  FlushEpochs epochs;
  const auto first = epochs.enter();
  int one = 0, two = 0;
  REQUIRE(epochs.wait([&] { ++one; }) != 0);
  const auto second = epochs.enter();
  REQUIRE(epochs.wait([&] { ++two; }) != 0);
  epochs.leave(second);
  CHECK(one == 0);
  CHECK(two == 0);  // still waits for `first`, made before it too
  epochs.leave(first);
  CHECK(one == 1);
  CHECK(two == 1);
}

TEST_CASE("flush epochs: a cancelled flush says how many it still waited for", "[flush]") {
  FlushEpochs epochs;
  const auto a = epochs.enter();
  epochs.enter();
  int flushed = 0;
  const auto ticket = epochs.wait([&] { ++flushed; });
  REQUIRE(ticket != 0);
  epochs.leave(a);
  std::uint64_t pending = 0;
  CHECK(epochs.cancel(ticket, pending));
  CHECK(pending == 1);
  CHECK_FALSE(epochs.cancel(ticket, pending));  // once
  CHECK(flushed == 0);
}
