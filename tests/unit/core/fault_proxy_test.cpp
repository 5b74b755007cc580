// SPDX-License-Identifier: Apache-2.0
// The fault proxy between a plain TCP client and a plain TCP server, both driven by the test:
// each fault is checked by what the far side receives, and changed while traffic flows.
#include <asio.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "polybus/fault_proxy.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using asio::ip::tcp;
using polybus::testing::Direction;
using polybus::testing::FaultProxy;
using polybus::testing::FaultProxyOptions;
using polybus::testing::Faults;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBound = 10s;  // only a failing test waits this long

// A client, the proxy and the server's side of the proxied connection, on the test's own
// io_context: every read runs it for at most kBound.
struct Link {
  asio::io_context io;
  tcp::acceptor server{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  std::optional<FaultProxy> proxy;
  tcp::socket client{io};
  tcp::socket upstream{io};

  explicit Link(FaultProxyOptions options = {}) {
    options.upstream_port = server.local_endpoint().port();
    proxy.emplace(options);
    connect();
  }
  void connect() {
    client = tcp::socket(io);
    client.connect(tcp::endpoint(asio::ip::address_v4::loopback(), proxy->port()));
    upstream = server.accept();
  }

  // Reads until `n` bytes came, the connection ended (its error in `ended`) or kBound passed.
  std::string read(tcp::socket& from, std::size_t n, std::error_code* ended = nullptr) {
    std::string got(n, '\0');
    std::size_t have = 0;
    std::error_code ec;
    asio::async_read(from, asio::buffer(got), [&](std::error_code e, std::size_t k) {
      ec = e;
      have = k;
    });
    io.restart();
    io.run_for(kBound);
    if (!io.stopped()) {  // timed out: cancel, and let the read finish
      from.cancel();
      io.restart();
      io.run();
      ec = asio::error::timed_out;
    }
    got.resize(have);
    if (ended) *ended = ec;
    return got;
  }
  void write(tcp::socket& to, const std::string& bytes) { asio::write(to, asio::buffer(bytes)); }
  // True when nothing arrives on `from` within `quiet` (a bound on absence: long enough that a
  // forwarded byte would have come on loopback).
  bool nothing_arrives(tcp::socket& from, std::chrono::milliseconds quiet) {
    char byte;
    bool arrived = false;
    from.async_read_some(asio::buffer(&byte, 1),
                         [&](std::error_code e, std::size_t) { arrived = !e; });
    io.restart();
    io.run_for(quiet);
    from.cancel();
    io.restart();
    io.run();
    return !arrived;
  }
};

template <typename Fn>
std::chrono::milliseconds timed(Fn&& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

}  // namespace

TEST_CASE("fault proxy: forwards both ways and passes a close on", "[fault_proxy]") {
  Link link;
  link.write(link.client, "hello upstream");
  CHECK(link.read(link.upstream, 14) == "hello upstream");
  link.write(link.upstream, "hello client");
  CHECK(link.read(link.client, 12) == "hello client");
  // The proxy counts a write when it completes, which may be just after the reader has it.
  CHECK(
      polybus::test::eventually([&] { return link.proxy->counters().to_client.forwarded == 12; }));
  auto c = link.proxy->counters();
  CHECK(c.to_upstream.read == 14);
  CHECK(c.to_upstream.forwarded == 14);
  CHECK(c.to_client.forwarded == 12);
  CHECK(c.accepted == 1);
  CHECK(c.active == 1);
  // The client closes its way: the server reads the end, and can still answer.
  link.client.shutdown(tcp::socket::shutdown_send);
  std::error_code ended;
  link.read(link.upstream, 1, &ended);
  CHECK(ended == asio::error::eof);
  link.write(link.upstream, "bye");
  CHECK(link.read(link.client, 3) == "bye");
  link.upstream.close();
  link.read(link.client, 1, &ended);
  CHECK(ended == asio::error::eof);
  CHECK(polybus::test::eventually([&] { return link.proxy->counters().active == 0; }));
}

TEST_CASE("fault proxy: latency is added to every piece, and changed while traffic flows",
          "[fault_proxy]") {
  Link link;
  link.proxy->set_faults(Direction::to_client, Faults{200ms});
  link.write(link.upstream, "slow");
  const auto took = timed([&] { CHECK(link.read(link.client, 4) == "slow"); });
  CHECK(took >= 200ms);
  // The other way is not delayed: an answer is not held behind the 200 ms (a bound on absence).
  link.write(link.client, "fast");
  CHECK(link.read(link.upstream, 4) == "fast");
  link.proxy->clear_faults();
  link.write(link.upstream, "again");
  CHECK(link.read(link.client, 5) == "again");
  CHECK(link.proxy->faults(Direction::to_client).latency == 0ms);
}

TEST_CASE("fault proxy: jitter never reorders bytes", "[fault_proxy]") {
  Link link;
  Faults faults;
  faults.latency = 1ms;
  faults.jitter = 20ms;
  link.proxy->set_faults(Direction::to_upstream, faults);
  std::string sent;
  for (int i = 0; i < 200; ++i) {
    const std::string piece = std::to_string(i) + ",";
    sent += piece;
    link.write(link.client, piece);
  }
  CHECK(link.read(link.upstream, sent.size()) == sent);
}

TEST_CASE("fault proxy: a bandwidth limit holds the rate", "[fault_proxy]") {
  Link link;
  Faults faults;
  faults.bytes_per_second = 256 * 1024;
  link.proxy->set_faults(Direction::to_upstream, faults);
  const std::string block(64 * 1024, 'b');
  const auto took = timed([&] {
    link.write(link.client, block);
    CHECK(link.read(link.upstream, block.size()) == block);
  });
  // 64 KiB at 256 KiB/s: a quarter second, less the first 10 ms piece that goes at once.
  CHECK(took >= 200ms);
}

TEST_CASE("fault proxy: slices are forwarded a delay apart", "[fault_proxy]") {
  Link link;
  Faults faults;
  faults.slice_bytes = 1;
  faults.slice_delay = 10ms;
  link.proxy->set_faults(Direction::to_client, faults);
  const auto took = timed([&] {
    link.write(link.upstream, "0123456789");
    CHECK(link.read(link.client, 10) == "0123456789");
  });
  CHECK(took >= 90ms);  // ten pieces, nine gaps
}

TEST_CASE("fault proxy: reset after N bytes cuts both sides mid-stream", "[fault_proxy]") {
  Link link;
  link.write(link.upstream, "before");
  CHECK(link.read(link.client, 6) == "before");
  Faults faults;
  faults.reset_after_bytes = 10;  // counted from now
  link.proxy->set_faults(Direction::to_client, faults);
  link.write(link.upstream, std::string(100, 'x'));
  std::error_code ended;
  CHECK(link.read(link.client, 100, &ended) == std::string(10, 'x'));
  CHECK(ended == asio::error::connection_reset);
  link.read(link.upstream, 1, &ended);
  CHECK(ended == asio::error::connection_reset);
  CHECK(link.proxy->counters().resets == 1);
  CHECK(link.proxy->counters().to_client.forwarded == 16);  // counted before the reset
  // The next connection is cut after its own first 10 bytes.
  link.connect();
  link.write(link.upstream, std::string(11, 'y'));
  CHECK(link.read(link.client, 11, &ended) == std::string(10, 'y'));
  CHECK(ended == asio::error::connection_reset);
}

TEST_CASE("fault proxy: a blackhole holds bytes and closes until it is lifted", "[fault_proxy]") {
  Link link;
  Faults faults;
  faults.blackhole = true;
  link.proxy->set_faults(Direction::to_upstream, faults);
  link.write(link.client, "held ");
  CHECK(polybus::test::eventually([&] { return link.proxy->counters().to_upstream.read == 5; }));
  CHECK(link.nothing_arrives(link.upstream, 100ms));
  // Answers still come back.
  link.write(link.upstream, "pong");
  CHECK(link.read(link.client, 4) == "pong");
  // Lifted: what was held goes on first, then the rest, as TCP's retransmissions would.
  link.proxy->set_faults(Direction::to_upstream, Faults{});
  link.write(link.client, "after");
  CHECK(link.read(link.upstream, 10) == "held after");
  CHECK(link.proxy->counters().to_upstream.discarded == 0);
}

TEST_CASE("fault proxy: a blackholed close reaches the other side only when it lifts",
          "[fault_proxy]") {
  Link link;
  Faults faults;
  faults.blackhole = true;
  link.proxy->set_faults(Direction::to_upstream, faults);
  link.write(link.client, "last words");
  link.client.close();
  CHECK(link.nothing_arrives(link.upstream, 200ms));  // no bytes, no FIN: a silent peer
  CHECK(link.proxy->counters().active == 1);
  link.proxy->clear_faults();
  std::error_code ended;
  CHECK(link.read(link.upstream, 100, &ended) == "last words");
  CHECK((ended == asio::error::eof || ended == asio::error::connection_reset));
}

TEST_CASE("fault proxy: close_one_side leaves a half-open connection", "[fault_proxy]") {
  Link link;
  link.proxy->close_one_side(Direction::to_client);
  std::error_code ended;
  link.read(link.client, 1, &ended);
  CHECK(ended == asio::error::eof);
  // The client's way still works, and what the server says now is dropped.
  link.write(link.client, "still here");
  CHECK(link.read(link.upstream, 10) == "still here");
  link.write(link.upstream, "unheard");
  CHECK(polybus::test::eventually([&] { return link.proxy->counters().to_client.discarded == 7; }));
}

TEST_CASE("fault proxy: reset_connections resets every open connection now", "[fault_proxy]") {
  Link link;
  link.proxy->reset_connections();
  std::error_code ended;
  link.read(link.client, 1, &ended);
  CHECK(ended == asio::error::connection_reset);
  link.read(link.upstream, 1, &ended);
  CHECK(ended == asio::error::connection_reset);
  CHECK(link.proxy->counters().resets == 1);
  CHECK(link.proxy->counters().active == 0);
}

TEST_CASE("fault proxy: refused connections are reset while refusing, then accepted again",
          "[fault_proxy]") {
  Link link;
  link.proxy->refuse_connections(1h);
  tcp::socket refused(link.io);
  refused.connect(tcp::endpoint(asio::ip::address_v4::loopback(), link.proxy->port()));
  std::error_code ended;
  link.read(refused, 1, &ended);
  CHECK(ended == asio::error::connection_reset);
  CHECK(link.proxy->counters().refused == 1);
  // The connection open before goes on.
  link.write(link.client, "ok");
  CHECK(link.read(link.upstream, 2) == "ok");
  link.proxy->refuse_connections(0ms);
  link.connect();
  link.write(link.client, "new");
  CHECK(link.read(link.upstream, 3) == "new");
  CHECK(link.proxy->counters().accepted == 2);
}

TEST_CASE("fault proxy: an upstream nobody listens on resets the client", "[fault_proxy]") {
  asio::io_context io;
  std::uint16_t dead_port;
  {
    tcp::acceptor taken(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    dead_port = taken.local_endpoint().port();
  }
  FaultProxyOptions options;
  options.upstream_port = dead_port;
  FaultProxy proxy(options);
  tcp::socket client(io);
  client.connect(tcp::endpoint(asio::ip::address_v4::loopback(), proxy.port()));
  char byte;
  std::error_code ec;
  client.read_some(asio::buffer(&byte, 1), ec);
  CHECK(ec == asio::error::connection_reset);
  CHECK(proxy.counters().upstream_failures == 1);
}

TEST_CASE("fault proxy: listens on loopback only unless allowed", "[fault_proxy]") {
  FaultProxyOptions options;
  options.upstream_port = 1;
  options.listen_host = "0.0.0.0";
  CHECK_THROWS_AS(FaultProxy(options), std::invalid_argument);
  options.listen_host = "not an address";
  CHECK_THROWS_AS(FaultProxy(options), std::system_error);
}

TEST_CASE("fault proxy: runs on the caller's io_context", "[fault_proxy]") {
  asio::io_context proxy_io;
  auto work = asio::make_work_guard(proxy_io);
  std::thread runner([&] { proxy_io.run(); });
  {
    FaultProxyOptions options;
    options.io_context = &proxy_io;
    Link link(options);
    link.proxy->set_faults(Direction::to_upstream, Faults{20ms});
    link.write(link.client, "on yours");
    CHECK(link.read(link.upstream, 8) == "on yours");
  }
  work.reset();
  runner.join();
}
