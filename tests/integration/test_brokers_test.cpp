// SPDX-License-Identifier: Apache-2.0
// The in-process brokers listen where they are told (`polybus broker NAME --port P`, a user's
// fixed test port), serve there, refuse a port that is taken with an error, and keep their port
// while stopped.
#include <asio.hpp>
#include <catch2/catch.hpp>
#include <future>

#include "polybus/io/port_hold.hpp"
#include "polybus/polybus.hpp"
#include "polybus/testing.hpp"

using namespace polybus;

namespace {

// One message (or one request) through the broker at `url`.
void round_trip(const std::string& url) {
  auto client = connect(url);
  const auto caps = client.capabilities();
  std::promise<std::string> got;
  Subscription sub;
  if (caps.publish && caps.subscribe) {
    sub = client.subscribe("fixed-port", {}, [&](Message& m) {
      try {
        got.set_value(std::string(m.payload()));
      } catch (const std::future_error&) {  // a redelivery
      }
    });
    REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
    REQUIRE(client.publish_sync("fixed-port", "hello") == std::error_code{});
    auto future = got.get_future();
    REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK(future.get() == "hello");
  } else {
    REQUIRE(caps.request_reply);
    sub = client.serve("fixed-port", [](Message& m) { return std::string(m.payload()); });
    REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
    CHECK(client.request_sync("fixed-port", "hello", std::chrono::seconds(10)).payload == "hello");
  }
  CHECK(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

}  // namespace

TEST_CASE("test brokers: each with a TCP port listens on the port it is given", "[test_brokers]") {
  std::size_t with_port = 0;
  for (const auto& factory : testing::test_brokers()) {
    if (!factory.start_on_port) continue;
    ++with_port;
    DYNAMIC_SECTION(factory.name) {
      // A free port, held while the broker binds beside it: no other socket takes it first.
      asio::io_context io;
      PortHold reserved(io);
      reserved.hold({asio::ip::make_address("127.0.0.1"), 0});
      const auto port = reserved.port();
      REQUIRE(port != 0);
      auto broker = factory.start_on_port(port);
      reserved.release();
      const std::string url = broker->url();
      CHECK_THAT(url, Catch::StartsWith(factory.scheme + "://127.0.0.1:" + std::to_string(port)));
      round_trip(url);
    }
  }
  // nsq, nsq+lookupd, figg, figg-quirks, quickio (three carriers), memodb+tcp at least.
  CHECK(with_port >= 8);
}

TEST_CASE("test brokers: a port that is taken is refused with the system's error",
          "[test_brokers]") {
  asio::io_context io;
  asio::ip::tcp::acceptor taken(io, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = taken.local_endpoint().port();
  for (const auto& factory : testing::test_brokers()) {
    if (!factory.start_on_port) continue;
    DYNAMIC_SECTION(factory.name) {
      CHECK_THROWS(factory.start_on_port(port));
    }
  }
}

TEST_CASE("test brokers: those with no TCP port say so by having no start_on_port",
          "[test_brokers]") {
  for (const auto& factory : testing::test_brokers()) {
    if (factory.name == "mem" || factory.name == "memodb+ipc") CHECK(!factory.start_on_port);
  }
}

TEST_CASE("test brokers: a stopped broker keeps its port, refusing connections, until it starts",
          "[test_brokers]") {
  for (const auto& factory : testing::test_brokers()) {
    // nsq+lookupd's URL names nsqlookupd, which stays up; nsq covers its nsqd.
    if (!factory.start_on_port || factory.name == "nsq+lookupd") continue;
    DYNAMIC_SECTION(factory.name) {
      auto broker = factory.start();
      const std::string url = broker->url();
      const std::string host = "://127.0.0.1:";
      REQUIRE(url.find(host) != std::string::npos);
      const auto port =
          static_cast<std::uint16_t>(std::stoul(url.substr(url.find(host) + host.size())));
      broker->stop();
      asio::io_context io;
      const asio::ip::tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
      std::error_code ec;
      asio::ip::tcp::socket probe(io);
      probe.connect(at, ec);
      CHECK(ec == asio::error::connection_refused);
      // Another socket cannot take the port (as a bind to port 0 elsewhere might).
      asio::ip::tcp::acceptor other(io);
      other.open(at.protocol());
      other.bind(at, ec);
      CHECK(ec == asio::error::address_in_use);
      other.close();
      broker->start();
      round_trip(url);
    }
  }
}

TEST_CASE("test brokers: each starts with a journal, fault rules and a clock, the same way",
          "[test_brokers]") {
  for (const auto& factory : testing::test_brokers()) {
    if (!factory.start_with) continue;
    DYNAMIC_SECTION(factory.name) {
      testing::TestBrokerOptions options;
      options.journal_capacity = 10000;
      options.clock = std::make_shared<polybus::ManualClock>();
      // A rule that matches everything and never fires: it counts, it changes nothing.
      options.faults.push_back(testing::parse_fault_rule("unit=*,probability=0,seed=1,close"));
      auto broker = factory.start_with(options);
      REQUIRE(broker->journal() != nullptr);
      REQUIRE(broker->faults() != nullptr);
      CHECK(broker->clock() == options.clock);
      CHECK_FALSE(broker->faults()->empty());
      round_trip(broker->url());
      const auto entries = broker->journal()->entries();
      const auto received =
          std::count_if(entries.begin(), entries.end(),
                        [](const testing::JournalEntry& e) { return e.received; });
      CHECK(received > 0);                                         // what the client sent
      CHECK(static_cast<std::size_t>(received) < entries.size());  // and what it was sent
      CHECK(broker->faults()->fired(1) == 0);
    }
  }
}

TEST_CASE("test brokers: every in-process broker has start_with", "[test_brokers]") {
  std::vector<std::string> without;
  for (const auto& factory : testing::test_brokers())
    if (!factory.start_with) without.push_back(factory.name);
  CHECK(without == std::vector<std::string>{});
}
