// SPDX-License-Identifier: Apache-2.0
// Servers that misbehave in a loop (over RDY, false ACKs, endless moves), measured: the share of
// a core the client spends while its reconnect policy paces it. Hidden from ctest.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "hostile_server.hpp"
#include "hostile_test_support.hpp"

#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

namespace {

// Runs the client against a server misbehaving in a loop, with the default reconnect policy,
// and prints the share of one core used: a measurement for docs and notes, not an assertion.
void soak(const char* what, const std::function<Client()>& start) {
  const char* env = std::getenv("POLYBUS_SOAK_SECONDS");
  const int seconds = env ? std::atoi(env) : 10;
  auto client = start();
  std::this_thread::sleep_for(2s);  // past the first, fast attempts
  const double cpu0 = cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("soak %-44s %5.2f%% of a core over %d s\n", what, 100.0 * (cpu_ms() - cpu0) / wall,
              seconds);
  client.close_sync(5s);
}
}  // namespace

// Hidden from ctest ([.]): `polybus_hostile_tests "[soak]"`, POLYBUS_SOAK_SECONDS (default 10).
TEST_CASE("soak: CPU while a server misbehaves in a loop", "[.][soak]") {
  HostileServer rdy([](HostileConnection& c, std::size_t) {
    if (!nsq_handshake(c, true)) return;
    std::string flood;
    for (int i = 0; i < 2000; ++i) flood += nsq_message(static_cast<std::uint64_t>(i), "x");
    c.send(flood);
    c.hold_open();
  });
  soak("nsq: messages over RDY on every connection", [&] {
    auto client = connect("nsq://" + rdy.address());
    client.subscribe("t", group("c"), [](Message&) {});
    return client;
  });
  HostileServer ack([](HostileConnection& c, std::size_t) {
    if (!c.read_until([](const std::string& r) { return r.size() >= 8; })) return;
    c.send(std::string("\x00\x06\x00\x01", 4) + be64(~std::uint64_t{0}).insert(0, be32(8)));
    c.hold_open();
  });
  soak("figg: an ACK for an unsent number on every connection", [&] {
    auto client = connect("figg://" + ack.address());
    client.publish("t", "x", within(60s), [](std::error_code) {});
    return client;
  });
  std::atomic<std::uint16_t> port_a{0}, port_b{0};
  auto mover = [](std::atomic<std::uint16_t>* to) {
    return [to](HostileConnection& c, std::size_t) {
      if (!qio_handshake(c)) return;
      c.send(qio_frame("/qio/move:0=\"127.0.0.1:" + std::to_string(to->load()) + "\""));
      c.hold_open();
    };
  };
  HostileServer a(mover(&port_b));
  HostileServer b(mover(&port_a));
  port_a = a.port();
  port_b = b.port();
  soak("quickio: two servers moving the client back and forth",
       [&] { return connect("quickio://" + a.address()); });
  HostileServer dead([](HostileConnection& c, std::size_t) {
    if (!qio_handshake(c)) return;
    c.send(qio_frame("/qio/move:0=\"127.0.0.1:1\""));
    c.hold_open();
  });
  soak("quickio: a move to a dead port", [&] { return connect("quickio://" + dead.address()); });
}
