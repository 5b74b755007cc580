// SPDX-License-Identifier: Apache-2.0
// The reconnect loop every adapter runs: what it reports, what it counts, how it paces.
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>
#include <vector>

#include "polybus/error.hpp"
#include "polybus/io/reconnect.hpp"

using namespace polybus;
using namespace std::chrono_literals;

TEST_CASE("the reconnector waits per the policy and resets", "[reconnect]") {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  std::vector<std::uint32_t> seen;
  Reconnector reconnector(strand, Backoff::custom([&](std::uint32_t n) {
                            seen.push_back(n);
                            return std::chrono::milliseconds(1);
                          }));
  int attempts = 0;
  std::function<void()> attempt = [&] {
    if (++attempts < 3) reconnector.schedule(attempt);
  };
  reconnector.schedule(attempt);
  io.run();
  CHECK(attempts == 3);
  CHECK(seen == std::vector<std::uint32_t>{1, 2, 3});
  reconnector.succeeded();
  io.restart();
  reconnector.schedule([] {});
  io.run();
  CHECK(seen.back() == 1);
}

namespace {

// A loop on its own io_context, with every event and count it reports kept.
struct LoopUnderTest {
  asio::io_context io;
  Strand strand = asio::make_strand(io);
  std::vector<StateEvent> events;
  int reconnects = 0;
  std::vector<std::uint32_t> asked;  // the attempt numbers the policy was asked about
  ReconnectLoop loop{strand, Backoff::custom([this](std::uint32_t n) {
                       asked.push_back(n);
                       return std::chrono::milliseconds(n);
                     }),
                     "host:1",
                     ReconnectLoop::Reports{[this](const StateEvent& e) { events.push_back(e); },
                                            [this] { ++reconnects; }}};

  std::vector<ConnectionState> states() const {
    std::vector<ConnectionState> out;
    for (const auto& e : events) out.push_back(e.state);
    return out;
  }
};

using S = ConnectionState;

}  // namespace

TEST_CASE("a refused attempt is reported and retried, and is not counted as a reconnect",
          "[reconnect]") {
  LoopUnderTest t;
  int attempts = 0;
  t.loop.attempting();
  auto delay = t.loop.lost(make_error_code(errc::connect_failed), "refused", [&] { ++attempts; });
  CHECK(delay == 1ms);
  CHECK(t.states() == std::vector<S>{S::connecting, S::disconnected, S::reconnecting});
  CHECK(t.events[1].detail == "refused");
  CHECK(t.events[1].endpoint == "host:1");
  CHECK(t.events[2].retry_in == 1ms);
  CHECK(t.reconnects == 0);
  t.io.run();
  CHECK(attempts == 1);
}

TEST_CASE("a connection that was up and ended counts one reconnect", "[reconnect]") {
  LoopUnderTest t;
  t.loop.attempting();
  t.loop.connected();
  CHECK(t.loop.up());
  t.loop.ended(make_error_code(errc::disconnected), "gone");
  CHECK_FALSE(t.loop.up());
  CHECK(t.reconnects == 1);
  t.loop.ended(make_error_code(errc::disconnected), "gone again");  // not up: not counted twice
  CHECK(t.reconnects == 1);
}

TEST_CASE("the backoff starts over only once the connection proved itself", "[reconnect]") {
  LoopUnderTest t;
  auto cycle = [&](bool prove) {
    t.loop.attempting();
    t.loop.connected();
    if (prove) t.loop.proven();
    t.loop.lost(make_error_code(errc::protocol_error), "bad frame", [] {});
  };
  cycle(false);
  cycle(false);
  cycle(false);
  // A server that accepts and then breaks the protocol is paced like one that refuses.
  CHECK(t.asked == std::vector<std::uint32_t>{1, 2, 3});
  cycle(true);
  CHECK(t.asked.back() == 1);
  CHECK(t.reconnects == 4);
}

TEST_CASE("a retry at once skips the backoff and says so", "[reconnect]") {
  LoopUnderTest t;
  int attempts = 0;
  t.loop.attempting();
  t.loop.connected();
  t.loop.set_endpoint("elsewhere:2");
  t.loop.ended(make_error_code(errc::disconnected), "moved");
  t.loop.retry_now(make_error_code(errc::disconnected), "moved", [&] { ++attempts; });
  CHECK(t.asked.empty());
  CHECK(t.events.back().state == S::reconnecting);
  CHECK(t.events.back().retry_in == 0ms);
  CHECK(t.events.back().endpoint == "elsewhere:2");
  t.io.run();
  CHECK(attempts == 1);
}

TEST_CASE("a retired connection is reported, not counted, and its retry is dropped",
          "[reconnect]") {
  LoopUnderTest t;
  int attempts = 0;
  t.loop.attempting();
  t.loop.connected();
  t.loop.retry({}, "scheduled before", [&] { ++attempts; });
  t.loop.retired(make_error_code(errc::disconnected), "no longer listed");
  t.io.run();
  CHECK(attempts == 0);
  CHECK(t.reconnects == 0);
  CHECK(t.events.back().state == S::disconnected);
}

TEST_CASE("cancel drops a scheduled attempt", "[reconnect]") {
  LoopUnderTest t;
  int attempts = 0;
  t.loop.attempting();
  t.loop.lost(make_error_code(errc::connect_failed), "refused", [&] { ++attempts; });
  t.loop.cancel();
  t.io.run();
  CHECK(attempts == 0);
}
