// SPDX-License-Identifier: Apache-2.0
// Hostile MemoDB brokers: READY answered with DISCONNECT, SP headers and messages gotten wrong,
// and a broker that stops reading.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include "hostile_server.hpp"
#include "hostile_test_support.hpp"

#include "polybus/memodb/codec.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

TEST_CASE("memodb: a broker that answers every READY with DISCONNECT gets READY with backoff",
          "[hostile][memodb]") {
  nng_socket socket;
  REQUIRE(nng_rep0_open(&socket) == 0);
  nng_listener listener;
  REQUIRE(nng_listen(socket, "tcp://127.0.0.1:0", &listener, 0) == 0);
  int port = 0;
  REQUIRE(nng_listener_get_int(listener, NNG_OPT_TCP_BOUND_PORT, &port) == 0);
  nng_socket_set_ms(socket, NNG_OPT_RECVTIMEO, 20);
  std::atomic<bool> stop{false};
  std::atomic<int> readys{0};
  std::thread broker([&] {
    while (!stop.load()) {
      nng_msg* msg = nullptr;
      if (nng_recvmsg(socket, &msg, 0) != 0) continue;
      memodb::Header header;
      std::string_view payload;
      const bool ready =
          !memodb::decode(
              std::string_view(static_cast<const char*>(nng_msg_body(msg)), nng_msg_len(msg)),
              header, payload) &&
          header.type == memodb::MessageType::ready;
      nng_msg_free(msg);
      if (!ready) continue;
      ++readys;
      std::string answer;
      if (memodb::append_disconnect(answer, std::string_view("\0\0\0\1", 4))) continue;
      nng_msg* reply = nullptr;
      if (nng_msg_alloc(&reply, 0) != 0) continue;
      nng_msg_append(reply, answer.data(), answer.size());
      if (nng_sendmsg(socket, reply, 0) != 0) nng_msg_free(reply);
    }
  });
  Reports reports;
  {
    auto client = connect(
        "memodb+tcp://127.0.0.1:" + std::to_string(port) + "?reconnect_initial=10ms&workers=1",
        reports.options());
    auto sub = client.serve("echo", [](Message& m) { return std::string(m.payload()); });
    // Waits below 10, 20, 40, 80, 160 ms (full jitter, as NNG's own reconnects): sent again at
    // once instead, READY would go out 8,000 times a second.
    CHECK(reports.wait_count("READY again in", 5));
    CHECK(readys.load() <= 8);
    client.close_sync(5s);
  }
  stop.store(true);
  broker.join();
  nng_close(socket);
}

namespace {
// rep0's side of the SP connection header, and a reply to the client's request ID.
const std::string kRep0Header("\0SP\0\0\x31\0\0", 8);
bool sp_headers(HostileConnection& c, std::string_view ours = kRep0Header) {
  return c.read_until([](std::string& r) { return r.size() >= 8; }) && c.send(ours);
}
}  // namespace

TEST_CASE("memodb: SP the broker gets wrong is a named error, and the client connects again",
          "[hostile][memodb]") {
  // Each connection breaks SP a way of its own; the last is a quiet good broker.
  HostileServer server([](HostileConnection& c, std::size_t index) {
    switch (index) {
      case 0:  // not rep0 (pub0)
        sp_headers(c, std::string("\0SP\0\0\x20\0\0", 8));
        break;
      case 1:  // not SP at all
        sp_headers(c, "HTTP/1.1");
        break;
      case 2:  // a length of 1 TiB: refused before anything is allocated for it
        if (sp_headers(c)) c.send(be64(std::uint64_t{1} << 40));
        break;
      case 3:  // a reply whose first word lacks the request ID's top bit
        if (sp_headers(c)) c.send(be64(5) + std::string("\0\0\0\x01x", 5));
        break;
      case 4:  // a message that drips in
        if (sp_headers(c)) {
          c.send(be64(1000));
          drip(c);
        }
        break;
      default:
        if (sp_headers(c)) c.hold_open();
    }
    c.hold_open();
  });
  Reports reports;
  auto client = connect("memodb+tcp://" + server.address() +
                            "?reconnect_initial=10ms&reconnect_max=50ms&max_frame_size=65536"
                            "&frame_timeout=300ms",
                        reports.options());
  CHECK(reports.wait_text("the peer speaks SP protocol 0x0020, not rep0"));
  CHECK(reports.wait_text("are not an SP header"));
  CHECK(reports.wait_text("SP message of 1099511627776 bytes, over the limit of 65536"));
  CHECK(reports.wait_text("a reply without a request ID"));
  CHECK(reports.wait_text("exceeds frame_timeout=300ms"));
  CHECK(reports.saw_reason(make_error_code(errc::protocol_error)));
  CHECK(reports.saw_reason(make_error_code(errc::frame_too_large)));
  CHECK(reports.saw_reason(make_error_code(errc::limit_exceeded)));
  CHECK(server.wait_connections(6));
  INFO(reports.dump());
  CHECK_FALSE(client.close_sync(5s));
}

TEST_CASE("memodb: a broker that stops reading trips write_timeout, and the request fails in time",
          "[hostile][memodb]") {
  HostileServer server([](HostileConnection& c, std::size_t) {
    if (!sp_headers(c)) return;
    c.stop_reading();
  });
  Reports reports;
  auto client =
      connect("memodb+tcp://" + server.address() + "?reconnect_initial=10ms&write_timeout=300ms",
              reports.options());
  // Far more than loopback's socket buffers hold.
  const Reply reply = client.request_sync("svc", std::string(8 << 20, 'x'), 3s);
  // Failed at its deadline, or sooner when the next attempt would come after it (the core says
  // so with the cause).
  INFO(reply.status().message());
  CHECK((reply.ec == errc::timeout || reply.ec == errc::disconnected));
  CHECK(reports.wait_text("made no progress for 300ms"));
  CHECK(reports.saw_reason(make_error_code(errc::timeout)));
  CHECK(server.wait_connections(2));
  CHECK_FALSE(client.close_sync(5s));
}
