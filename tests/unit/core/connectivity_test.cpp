// SPDX-License-Identifier: Apache-2.0
// What an operation that fails for want of a connection is told, and when: from the state
// events the adapters report, with no adapter, socket or clock of its own.
#include <catch2/catch.hpp>

#include "core/client/src/connectivity.hpp"
#include "polybus/error.hpp"

using namespace polybus;
using namespace std::chrono_literals;
using polybus::detail::Connectivity;

namespace {

void refused(Connectivity& c, std::chrono::milliseconds retry_in) {
  const auto why = make_error_code(errc::connect_failed);
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::disconnected, "h:1", why,
             "cannot connect to h:1: connection refused");
  c.on_state(ConnectionState::reconnecting, "h:1", why, "cannot connect to h:1: connection refused",
             retry_in);
}

void dropped(Connectivity& c, std::chrono::milliseconds retry_in) {
  const auto why = make_error_code(errc::disconnected);
  c.on_state(ConnectionState::disconnected, "h:1", why, "h:1: connection reset by peer");
  c.on_state(ConnectionState::reconnecting, "h:1", why, "h:1: connection reset by peer", retry_in);
}

}  // namespace

TEST_CASE(
    "a client that never connected fails its operations after connect_timeout, or at once "
    "when no attempt is left in time",
    "[connectivity]") {
  Connectivity c;
  c.set_connect_timeout(5000ms);
  const auto now = Clock::now();
  refused(c, 100ms);
  CHECK(c.first_look(now, now + 20s) == now + 5s);
  refused(c, 8000ms);  // the next attempt comes after connect_timeout
  CHECK(c.first_look(now, now + 20s) == now);
  auto verdict = c.verdict("publish to t", now, now + 20s, now);
  CHECK(verdict == errc::connect_failed);
  CHECK_THAT(verdict.cause(), Catch::Contains("no connection within connect_timeout=5000ms") &&
                                  Catch::Contains("connection refused"));
}

TEST_CASE(
    "a client that was connected fails an operation at once when its broker went away and "
    "the next attempt comes after the operation's deadline",
    "[connectivity]") {
  Connectivity c;
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::connected, "h:1", {}, {});
  const auto now = Clock::now();
  CHECK(c.first_look(now, now + 2s) == now + 2s);  // up: looked at by its deadline only
  CHECK_FALSE(c.attempts_exhausted(now, now + 2s));

  dropped(c, 100ms);  // back in time: wait for it
  CHECK_FALSE(c.attempts_exhausted(now, now + 2s));
  CHECK(c.first_look(now, now + 2s) == now + 2s);
  CHECK_FALSE(c.verdict("publish to t", now, now + 2s, now));

  dropped(c, 10'000ms);  // not back before the deadline: no reason to wait for it
  CHECK(c.attempts_exhausted(now, now + 2s));
  CHECK_FALSE(c.attempts_exhausted(now, now + 60s));
  CHECK(c.first_look(now, now + 2s) == now);
  auto verdict = c.verdict("publish to t", now, now + 2s, Clock::now());
  INFO(verdict.message());
  CHECK(verdict == errc::disconnected);
  CHECK_THAT(verdict.cause(), Catch::Contains("publish to t: not connected") &&
                                  Catch::Contains("comes after its deadline") &&
                                  Catch::Contains("connection reset by peer"));

  // Connected again: nothing fails early.
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::connected, "h:1", {}, {});
  CHECK_FALSE(c.attempts_exhausted(now, now + 2s));
  CHECK_FALSE(c.verdict("publish to t", now, now + 2s, now));
}

TEST_CASE("at its deadline an operation is told the last failure, or a timeout while connected",
          "[connectivity]") {
  Connectivity c;
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::connected, "h:1", {}, {});
  const auto start = Clock::now();
  const auto deadline = start + 1s;
  auto verdict = c.verdict("request to svc", start, deadline, deadline);
  CHECK(verdict == errc::timeout);
  CHECK(verdict.cause() == "request to svc not completed within 1000ms");
  dropped(c, 100ms);
  verdict = c.verdict("request to svc", start, deadline, deadline);
  CHECK(verdict == errc::disconnected);
  CHECK_THAT(verdict.cause(), Catch::Contains("not connected: h:1: connection reset by peer"));
}

TEST_CASE("an operation late while its connection keeps being cut names the last cut",
          "[connectivity]") {
  Connectivity c;
  const auto start = Clock::now();
  const auto deadline = start + 1s;
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::connected, "h:1", {}, {});
  dropped(c, 100ms);  // cut after the operation began, and up again at its deadline
  c.on_state(ConnectionState::connecting, "h:1", {}, {});
  c.on_state(ConnectionState::connected, "h:1", {}, {});
  const auto verdict = c.verdict("request to svc", start, deadline, deadline);
  CHECK(verdict == errc::timeout);
  CHECK(verdict.cause() ==
        "request to svc not completed within 1000ms: a connection was lost meanwhile: h:1: "
        "connection reset by peer");
  // A cut from before the operation began says nothing about it.
  const auto later = Clock::now() + 1ms;
  CHECK(c.verdict("request to svc", later, later + 1s, later + 1s).cause() ==
        "request to svc not completed within 1000ms");
}
