// SPDX-License-Identifier: Apache-2.0
// Hostile QuickIO servers over raw TCP, WebSocket and HTTP: moves in loops, deep JSON, frames
// and responses that drip, heartbeat floods, upgrades that hang, and connections cut under use.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <string_view>
#include <thread>

#include "hostile_server.hpp"
#include "hostile_test_support.hpp"

#include "polybus/polybus.hpp"
#include "test_support.hpp"
#include "ws_frames.hpp"

using namespace polybus;
using namespace polybus::test;

namespace {

// How long after `since` `reports` saw `text` (max() if not within 30 s): the time a dead
// connection took to be given up.
std::chrono::milliseconds time_to_text(Reports& reports, const std::string& text,
                                       std::chrono::steady_clock::time_point since) {
  if (!reports.wait_text(text, 30s)) return std::chrono::milliseconds::max();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since);
}

}  // namespace

TEST_CASE("quickio: a callback reply nested 100,000 deep is refused without a crash",
          "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c)) return;
    if (index == 0) {
      // Wait for the request event "<path>:<id>=<json>" and answer its callback id.
      if (!c.read_until([](const std::string& r) {
            return r.find("room:") != std::string::npos &&
                   r.find('=', r.find("room:")) != std::string::npos;
          }))
        return;
      const std::string& r = c.received();
      auto colon = r.find("room:") + 5;
      std::string id = r.substr(colon, r.find('=', colon) - colon);
      std::string deep(100000, '[');
      deep += std::string(100000, ']');
      c.send(qio_frame("/qio/callback/" + id + ":0={\"code\":200,\"data\":" + deep + "}"));
    }
    c.hold_open();
  });
  Reports reports;
  auto client =
      connect("quickio://" + server.address() + "?reconnect_initial=10ms", reports.options());
  auto reply = client.request_sync("room", "hi", 10s);
  // The reply was refused with the connection it came on; the request fails for want of it.
  INFO(reply.status().message());
  CHECK((reply.ec == errc::disconnected || reply.ec == errc::protocol_error ||
         reply.ec == errc::connect_failed));
  INFO(reports.dump().substr(0, 3000));
  CHECK(reports.wait_text("nested at most 64 deep"));
  CHECK(server.wait_connections(2));  // and it came back
  client.close_sync(5s);
}

TEST_CASE("quickio: moves in a loop back off and stop at max_redirects", "[hostile][quickio]") {
  // Atomics: the servers read the ports on their own threads (a socket is no synchronisation
  // that ThreadSanitizer sees).
  auto mover = [](std::atomic<std::uint16_t>* to) {
    return [to](HostileConnection& c, std::size_t) {
      if (!qio_handshake(c)) return;
      c.send(qio_frame("/qio/move:0=\"127.0.0.1:" + std::to_string(to->load()) + "\""));
      c.hold_open();
    };
  };
  std::atomic<std::uint16_t> port_a{0}, port_b{0};
  HostileServer a(mover(&port_b));
  HostileServer b(mover(&port_a));
  port_a = a.port();
  port_b = b.port();
  Reports reports;
  auto client = connect("quickio://" + a.address() + "?max_redirects=4&reconnect_initial=20ms",
                        reports.options());
  CHECK(reports.wait_text("max_redirects=4"));
  INFO(reports.dump().substr(0, 3000));
  // Each move after the first waited for the backoff; past four, moves are refused and the
  // client stays on its backoff against the last server instead of bouncing.
  const std::size_t at_limit = a.connections() + b.connections();
  CHECK(at_limit <= 6);
  client.close_sync(5s);
}

TEST_CASE("quickio: a server that moves the client to itself forever is paced and named a loop",
          "[hostile][quickio]") {
  // Every connection proves itself (a heartbeat the client accepts) and is then moved to the
  // same server again, so "moves in a row" never grows: followed at once, that is about 1,200
  // connections a second, a third of a core. Moves are followed at once only while few: a run of
  // them waits the backoff, which proving does not reset.
  std::atomic<std::uint16_t> self_port{0};
  HostileServer server([&](HostileConnection& c, std::size_t) {
    if (!qio_handshake(c)) return;
    c.send(qio_frame("/qio/heartbeat:0=null"));
    c.send(qio_frame("/qio/move:0=\"127.0.0.1:" + std::to_string(self_port.load()) + "\""));
    c.hold_open();
  });
  self_port = server.port();
  Reports reports;
  auto client =
      connect("quickio://" + server.address() + "?reconnect_initial=10ms", reports.options());
  REQUIRE(reports.wait_text("moved in a loop"));
  const std::size_t before = server.connections();
  const double cpu_before = cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3s);  // the measured window, not a synchronisation
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double share = (cpu_ms() - cpu_before) / wall;
  const std::size_t moves = server.connections() - before;
  INFO(moves << " connections in 3 s, " << 100 * share << "% of a core\n"
             << reports.dump().substr(0, 3000));
  // The backoff from 10 ms doubles each move (about 9 in 3 s), not 3,600.
  CHECK(moves <= 15);
  CHECK(share < (kSanitized ? 0.25 : 0.05));
  client.close_sync(5s);
}

TEST_CASE("quickio: a move to a port nobody listens on backs off", "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t) {
    if (!qio_handshake(c)) return;
    c.send(qio_frame("/qio/move:0=\"127.0.0.1:1\""));
    c.hold_open();
  });
  Reports reports;
  auto client = connect(
      "quickio://" + server.address() + "?reconnect_initial=10ms&reconnect_backoff=exponential",
      reports.options());
  // Each attempt waits twice as long as the one before it, rather than reconnecting at once
  // forever (a core at 100%).
  CHECK(reports.wait_text("reconnecting in 80ms"));
  CHECK(reports.attempts() < 20);
  client.close_sync(5s);
}

TEST_CASE("quickio+ws: a client closed while its upgrade hangs or is refused leaks nothing",
          "[hostile][quickio]") {
  // Run under ASan, LeakSanitizer checks this at exit: the WebSocket connection must go.
  for (const char* answer : {"HTTP/1.1 400 Bad Request\r\nContent-Le", "garbage\r\n\r\n\x01\x02"}) {
    HostileServer server([answer](HostileConnection& c, std::size_t) {
      if (!c.read_until(
              [](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; }))
        return;
      c.send(answer);
      c.hold_open();
    });
    Reports reports;
    auto client = connect("quickio+ws://" + server.address(), reports.options());
    REQUIRE(server.wait_connections(1));
    CHECK(client.close_sync(5s) == std::error_code{});
  }
}

TEST_CASE("quickio: a raw frame that drips in is cut off by frame_timeout", "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c)) return;
    if (index == 0) {
      c.send(be64(1000));
      drip(c);  // a byte every 50 ms
      return;
    }
    c.hold_open();
  });
  expect_cut_off_by_frame_timeout(server, "quickio");
}

TEST_CASE("quickio: a raw frame that drips past heartbeat_timeout is a dead connection, named",
          "[hostile][quickio]") {
  // heartbeat_timeout=1s counts whole frames: a frame of 1000 bytes dripping a byte every 300 ms
  // ends the connection after about a second, not after frame_timeout (30 s by default).
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c)) return;
    if (index == 0) {
      c.send(be64(1000));
      drip_every(c, 300ms);
      return;
    }
    c.hold_open();
  });
  Reports reports;
  const auto start = std::chrono::steady_clock::now();
  auto client =
      connect("quickio://" + server.address() + "?heartbeat_timeout=1s&reconnect_initial=10ms",
              reports.options());
  const auto took = time_to_text(reports, "no whole frame for 1000ms (heartbeat_timeout)", start);
  INFO(reports.dump());
  CHECK(took < 10s);
  CHECK(server.wait_connections(2));
  client.close_sync(5s);
}

namespace {
// The server side of a QuickIO WebSocket: the 101 with the quickio subprotocol, then /qio/ohai
// both ways. Server frames are unmasked.
std::string ws_text_frame(std::string_view text) {
  return polybus::test::ws_frame(0x81, text);
}
bool qio_ws_handshake(HostileConnection& c) {
  if (!c.read_until([](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; }))
    return false;
  const std::string accept = polybus::test::ws_accept_for(c.received());
  c.received().clear();
  return c.send(
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Protocol: quickio\r\nSec-WebSocket-Accept: " +
             accept + "\r\n\r\n") &&
         c.send(ws_text_frame("/qio/ohai"));
}
}  // namespace

TEST_CASE("quickio+ws: a request late while the server keeps cutting its connection names why",
          "[hostile][quickio]") {
  // Every connection is closed by the server as soon as the client writes, with a close code no
  // endpoint may send (1005): the request never completes, and its timeout says what kept
  // cutting the connection, not only that it was late.
  HostileServer server([](HostileConnection& c, std::size_t) {
    if (!qio_ws_handshake(c)) return;
    if (!c.read_some(5s)) return;
    c.send(std::string{'\x88', '\x02', '\x03', '\xed'});
    c.hold_open();
  });
  Reports reports;
  auto client = connect("quickio+ws://" + server.address() +
                            "?reconnect_initial=10ms&reconnect_max=50ms&http_fallback=false",
                        reports.options());
  const auto reply = client.request_sync("probe", "x", 2s);
  INFO(reply.status().message() << "\n" << reports.dump().substr(0, 2000));
  CHECK(reply.ec);
  CHECK_THAT(reply.status().message(), Catch::Contains("request to probe"));
  // The connection's last failure, with the server's address: "a connection was lost
  // meanwhile: ..." while a new connection is up at the deadline, "not connected: ..." if not.
  CHECK_THAT(reply.status().message(), Catch::Contains(server.address() + ": "));
  client.close_sync(5s);
}

TEST_CASE("quickio+ws: a WebSocket frame that drips in is cut off by frame_timeout",
          "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_ws_handshake(c)) return;
    if (index == 0) {
      // A ping keeps arriving whole (control frames complete), then a text frame of 1000 bytes
      // whose payload comes a byte every 50 ms.
      c.send(std::string{'\x89', '\x00'});
      c.send(std::string{'\x81', '\x7e', '\x03', '\xe8'});
      drip(c);  // a byte every 50 ms
      return;
    }
    c.hold_open();
  });
  expect_cut_off_by_frame_timeout(server, "quickio+ws");
}

TEST_CASE("quickio+http: a response that drips in is cut off by frame_timeout",
          "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!c.read_until([](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; }))
      return;
    if (index == 0) {
      c.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
      drip(c);  // a byte every 50 ms
      return;
    }
    c.hold_open();
  });
  expect_cut_off_by_frame_timeout(server, "quickio+http");
}

namespace {

// One whole HTTP request of the client (head, and a body of its Content-Length), taken off
// what the connection received.
bool take_http_request(HostileConnection& c) {
  std::size_t size = 0;
  const bool whole = c.read_until([&](const std::string& r) {
    const auto head = r.find("\r\n\r\n");
    if (head == std::string::npos) return false;
    std::size_t length = 0;
    const auto field = r.find("Content-Length: ");
    if (field != std::string::npos && field < head) length = std::stoul(r.substr(field + 16));
    size = head + 4 + length;
    return r.size() >= size;
  });
  if (whole) c.received().erase(0, size);
  return whole;
}

}  // namespace

TEST_CASE(
    "quickio+http: a kept-alive connection the server ends as a request goes out is "
    "replaced, and the request goes again",
    "[hostile][quickio]") {
  // Connection 0 answers the handshake as QuickIO's server does (HTTP/1.0, no word about the
  // connection), takes the next request and ends without answering it: the race of a server
  // closing a kept connection just as the client reuses it. Later connections answer every
  // poll at once and keep the connection.
  std::atomic<bool> reused{false};
  Latch polls;
  HostileServer server([&](HostileConnection& c, std::size_t index) {
    if (index == 0) {
      if (!take_http_request(c)) return;
      const std::string body = "/qio/callback/1:0={\"code\":200,\"data\":null}\n";
      c.send("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body);
      reused = take_http_request(c);
      return;  // ended, unanswered
    }
    while (take_http_request(c)) {
      polls.count_down();
      if (!c.send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) return;
    }
  });
  Reports reports;
  auto client = connect(
      "quickio+http://" + server.address() + "?http_poll_delay_max=5ms&reconnect_initial=10ms",
      reports.options());
  REQUIRE(polls.wait_for(10));
  INFO(reports.dump());
  CHECK(reused);
  CHECK(server.connections() == 2);  // the one that ended, and the one that replaced it for good
  CHECK(reports.attempts() == 1);    // the session never dropped
  client.close_sync(5s);
}

TEST_CASE("quickio+ws: pings and events that arrive whole never trip frame_timeout",
          "[hostile][quickio]") {
  // Whole frames a little apart for five frame_timeouts: nothing is held partly, so the client
  // must still be there at the end (a false trip would close it within one frame_timeout).
  std::atomic<bool> peer_stayed{false};
  Latch script_done;
  HostileServer server([&](HostileConnection& c, std::size_t) {
    using clock = std::chrono::steady_clock;
    bool stayed = qio_ws_handshake(c);
    const auto end = clock::now() + 1s;
    while (stayed && clock::now() < end) {
      stayed =
          c.send(std::string{'\x89', '\x00'}) && c.send(ws_text_frame("/qio/heartbeat:0=null"));
      // Paces the frames 50 ms apart, reading the client's pongs and answers meanwhile.
      for (auto next = clock::now() + 50ms; stayed && clock::now() < next;)
        stayed =
            c.read_some(std::chrono::duration_cast<std::chrono::milliseconds>(next - clock::now()));
    }
    peer_stayed = stayed;
    script_done.count_down();
    c.hold_open();
  });
  Reports reports;
  auto client =
      connect("quickio+ws://" + server.address() + "?frame_timeout=200ms&reconnect_initial=10ms",
              reports.options());
  REQUIRE(script_done.wait_for(1));
  CHECK(peer_stayed);
  CHECK(server.connections() == 1);
  CHECK_FALSE(reports.saw_reason(make_error_code(errc::limit_exceeded)));
  client.close_sync(5s);
}

TEST_CASE("quickio: a heartbeat flood is answered once per write, not once per heartbeat",
          "[hostile][quickio]") {
  // Counted by the server's thread once the client closed: waited for, not polled.
  std::promise<std::size_t> answers_counted;
  auto answers = answers_counted.get_future();
  constexpr int kHeartbeats = 20000;
  HostileServer server([&](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c) || index > 0) return c.hold_open();
    // Wait for the request, flood heartbeats, then answer the request: once the client has the
    // reply it has read every heartbeat.
    if (!c.read_until([](const std::string& r) {
          auto at = r.find("room:");
          return at != std::string::npos && r.find('=', at) != std::string::npos;
        }))
      return;
    auto colon = c.received().find("room:") + 5;
    std::string id = c.received().substr(colon, c.received().find('=', colon) - colon);
    c.received().clear();
    std::string flood;
    for (int i = 1; i <= kHeartbeats; ++i)
      flood += qio_frame("/qio/heartbeat:" + std::to_string(i) + "=null");
    c.send(flood);
    c.send(qio_frame("/qio/callback/" + id + ":0={\"code\":200,\"data\":\"pong\"}"));
    while (c.read_some()) {
    }
    answers_counted.set_value(count_of(c.received(), "/qio/callback/"));
  });
  auto client = connect("quickio://" + server.address(), {});
  auto reply = client.request_sync("room", "ping", 20s);
  REQUIRE_FALSE(reply.ec);
  client.close_sync(5s);
  REQUIRE(answers.wait_for(kWaitBound) == std::future_status::ready);
  const std::size_t counted = answers.get();
  INFO("answers: " << counted);
  CHECK(counted >= 1);
  CHECK(counted <= 2000);  // one per heartbeat would be 20,000
}

TEST_CASE("quickio: max_json_depth bounds event data", "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c)) return;
    if (index == 0)
      c.send(qio_frame("/room:0=" + std::string(10, '[') + "1" + std::string(10, ']')));
    c.hold_open();
  });
  Reports reports;
  auto client =
      connect("quickio://" + server.address() + "?max_json_depth=8&reconnect_initial=10ms",
              reports.options());
  CHECK(reports.wait_text("nested at most 8 deep (max_json_depth)"));
  CHECK(server.wait_connections(2));
  client.close_sync(5s);
}

TEST_CASE("quickio: a publish the write buffer cannot take fails at once with limit_exceeded",
          "[hostile][quickio]") {
  for (const char* scheme : {"quickio", "quickio+ws"}) {
    INFO(scheme);
    HostileServer server([&](HostileConnection& c, std::size_t) {
      if (std::string(scheme) == "quickio+ws") {
        if (!qio_ws_handshake(c)) return;
      } else if (!qio_handshake(c)) {
        return;
      }
      c.hold_open();
    });
    auto client =
        connect(std::string(scheme) + "://" + server.address() + "?max_write_buffer=65536");
    // The write over the limit fails its publish at once with limit_exceeded: it does not end the
    // connection inside the send, nor leave the publish to run to its deadline as a bare timeout.
    auto status = client.publish_sync("room", std::string(100'000, 'x'), PublishOptions{20s, {}});
    CHECK(status == errc::limit_exceeded);
    client.close_sync(5s);
  }
}
