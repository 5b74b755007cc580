// SPDX-License-Identifier: Apache-2.0
// The raw TCP wire and the HTTP response reader, fed byte by byte.
#include <catch2/catch.hpp>

#include "http_exchange.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "raw_wire.hpp"
#include "ws_frames.hpp"
#include "ws_wire.hpp"

namespace {

using namespace polybus::quickio;
using polybus::test::ws_frame;

struct Recorder : detail::WireHandler {
  bool open = false;
  std::vector<std::string> events;
  void on_wire_open() override { open = true; }
  void on_wire_event(std::string_view text, const std::shared_ptr<const void>&) override {
    events.emplace_back(text);
  }
};

// The server's 101 to the upgrade request the wire wrote.
std::string upgrade_answer(const std::string& request) {
  return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: " +
         polybus::test::ws_accept_for(request) + "\r\nSec-WebSocket-Protocol: quickio\r\n\r\n";
}

}  // namespace

TEST_CASE("raw wire: /qio/ohai out first, then frames, however the bytes are split") {
  Recorder recorder;
  detail::RawWire wire(1024, recorder);
  wire.start();
  CHECK(wire.output() == "/qio/ohai");
  wire.output().clear();
  std::string input = "/qio/ohai";
  append_raw_frame(input, "/a:0=1");
  append_raw_frame(input, R"(/b:0="two")");
  auto owner = std::make_shared<std::string>(input);
  std::string why;
  for (char c : input) REQUIRE_FALSE(wire.receive(owner, std::string_view(&c, 1), why));
  CHECK(recorder.open);
  CHECK(recorder.events == std::vector<std::string>{"/a:0=1", R"(/b:0="two")"});
  wire.send("/c:0=null");
  std::string expected;
  append_raw_frame(expected, "/c:0=null");
  CHECK(wire.output() == expected);
}

TEST_CASE("raw wire: a wrong handshake and an oversized frame are errors") {
  Recorder recorder;
  detail::RawWire wire(16, recorder);
  std::string why;
  CHECK(wire.receive(nullptr, "/qio/nope", why));
  CHECK_THAT(why, Catch::Contains("/qio/ohai"));
  detail::RawWire big(16, recorder);
  std::string input = "/qio/ohai";
  append_raw_frame(input, std::string(17, 'x'));
  why.clear();
  CHECK(big.receive(nullptr, input, why) == make_error_code(codec_errc::frame_too_large));
  CHECK_FALSE(why.empty());
}

TEST_CASE("http requests carry the session id, connect=true only first, and the body") {
  std::mt19937_64 random(1);
  auto sid = detail::new_session_id(random);
  CHECK(sid.size() == 32);
  CHECK(sid.find_first_not_of("0123456789abcdef") == std::string::npos);
  auto first = detail::make_poll_request("h:1", "", sid, true, "/qio/hostname:1=null");
  CHECK_THAT(first, Catch::StartsWith("POST /?sid=" + sid + "&connect=true HTTP/1.1\r\n"));
  CHECK_THAT(first, Catch::Contains("Content-Length: 20\r\n"));
  CHECK_THAT(first, Catch::EndsWith("\r\n\r\n/qio/hostname:1=null"));
  auto next = detail::make_poll_request("h:1", "/qio", sid, false, "");
  CHECK_THAT(next, Catch::StartsWith("POST /qio?sid=" + sid + " HTTP/1.1\r\n"));
  // Kept alive: HTTP/1.1 without "Connection: close" (the real server then keeps it too).
  CHECK_THAT(next, !Catch::Contains("Connection:"));
}

TEST_CASE(
    "WebSocket wire: a status outside 100-511 is refused before websocketpp parses it, "
    "however the line is split",
    "[quickio][ws]") {
  // websocketpp keeps the status in an enum of 0-511: 2200 would be undefined behaviour in it
  // (fuzz finding 3). Split so that a later read completes the line. (Long polling reads its
  // answers with core's http::ResponseReader: tests/unit/http_test.cpp.)
  const std::string first = "HTTP/1.1 22", rest = "00 X\r\nContent-Length: 0\r\n\r\n";

  struct NoEvents : detail::WireHandler {
    void on_wire_open() override {}
    void on_wire_event(std::string_view, const std::shared_ptr<const void>&) override {}
  } handler;
  detail::WsWire wire("127.0.0.1:1", "/", 1024, handler);
  wire.start();
  wire.output().clear();
  std::string ws_why;
  const auto owner = std::make_shared<std::string>();
  CHECK_FALSE(wire.receive(owner, first, ws_why));
  CHECK(wire.receive(owner, rest, ws_why) ==
        make_error_code(polybus::quickio::client_errc::handshake_refused));
  CHECK_THAT(ws_why, Catch::Contains("HTTP/1.1 2200"));
  CHECK(detail::http_status_of("HTTP/1.1 101 Switching Protocols\r\n") == 101);
  CHECK(detail::http_status_of("HTTP/1.1 1010 X\r\n") == -1);  // websocketpp would read 1010
  CHECK(detail::http_status_of("HTTP/1.1 200\r\n") == 200);
  CHECK(detail::http_status_of("HTTP/1.1 600 X\r\n") == -1);
  CHECK(detail::http_status_of("HTTP/1.1 577 X\r\n") == -1);  // past websocketpp's enum
  CHECK(detail::http_status_of("HTTP/1.1 511 X\r\n") == 511);
  CHECK(detail::http_status_of("HTTX/1.1 200 X\r\n") == -1);
}

TEST_CASE(
    "WebSocket wire: events come whole, split, fragmented or between control frames, "
    "in order",
    "[quickio][ws]") {
  Recorder recorder;
  detail::WsWire wire("127.0.0.1:1", "/", 1 << 20, recorder);
  wire.start();
  const std::string request = wire.output();
  wire.output().clear();
  const std::string big(300, 'x');  // the 16-bit length form
  // The 101, /qio/ohai and a first event in one read, as a server may send them.
  std::string bytes =
      upgrade_answer(request) + ws_frame(0x81, kHandshake) + ws_frame(0x81, "/a:0=1");
  bytes += ws_frame(0x89, "hi");                    // a ping, answered with a pong
  bytes += ws_frame(0x81, "/b:0=\"" + big + "\"");  // split below, a byte at a time
  bytes += ws_frame(0x01, "/c:0=") + ws_frame(0x89, "") + ws_frame(0x80, "[3]");
  bytes += ws_frame(0x81, "/d:0=4");
  const auto owner = std::make_shared<std::string>();
  std::string why;
  const std::size_t whole = upgrade_answer(request).size() + 30;  // into the ping
  REQUIRE_FALSE(wire.receive(owner, std::string_view(bytes).substr(0, whole), why));
  CHECK(recorder.open);
  CHECK(wire.output().find("/qio/ohai") == std::string::npos);  // masked: not in clear
  bool held_part = false;
  for (std::size_t at = whole; at < bytes.size(); ++at) {
    REQUIRE_FALSE(wire.receive(owner, std::string_view(bytes).substr(at, 1), why));
    held_part = held_part || wire.partial_frame();
  }
  CHECK(held_part);
  CHECK(recorder.events ==
        std::vector<std::string>{"/a:0=1", "/b:0=\"" + big + "\"", "/c:0=[3]", "/d:0=4"});
  CHECK_FALSE(wire.partial_frame());
  // The ohai and two pongs, nothing else: read frame by frame (the masked bytes are random, so
  // a search for the pong's first byte could also find them).
  std::vector<int> opcodes;
  const std::string_view out = wire.output();
  std::size_t at = 0;
  WsFrameHead head;
  while (at < out.size() && read_ws_frame_head(out.substr(at), head)) {
    CHECK(head.masked);
    opcodes.push_back(head.opcode);
    at += head.header + static_cast<std::size_t>(head.length);
  }
  CHECK(at == out.size());
  CHECK(opcodes == std::vector<int>{1, 10, 10});
}

TEST_CASE(
    "WebSocket wire: a frame over max_frame_size is refused from its header, and a "
    "masked frame from the server is an error",
    "[quickio][ws]") {
  for (int kind = 0; kind < 3; ++kind) {  // whole header, header split across reads, masked
    Recorder recorder;
    detail::WsWire wire("127.0.0.1:1", "/", 64, recorder);
    wire.start();
    const std::string request = wire.output();
    const auto owner = std::make_shared<std::string>();
    std::string why;
    REQUIRE_FALSE(wire.receive(owner, upgrade_answer(request) + ws_frame(0x81, kHandshake), why));
    REQUIRE(recorder.open);
    if (kind < 2) {
      // Only the header of a 300-byte frame: refused before its body is waited for, naming the
      // length it declares. Split, the header's first byte is held and the rest completes it.
      const std::string header = ws_frame(0x81, std::string(300, 'x')).substr(0, 4);
      if (kind == 1) {
        REQUIRE_FALSE(wire.receive(owner, header.substr(0, 1), why));
        CHECK(wire.partial_frame());
      }
      CHECK(wire.receive(owner, header.substr(kind == 1 ? 1 : 0), why) ==
            codec_errc::frame_too_large);
      CHECK_THAT(why, Catch::Contains("300 exceeds max_frame_size=64"));
    } else {
      std::string frame = ws_frame(0x81, "/a:0=1");
      frame[1] = static_cast<char>(frame[1] | 0x80);
      frame.insert(2, std::string(4, '\0'));
      CHECK(wire.receive(owner, frame, why));
      CHECK(recorder.events.empty());
    }
  }
}

TEST_CASE(
    "WebSocket wire: a frame split across reads is completed from the next, and the events "
    "after it are views of that read, kept by its owner",
    "[quickio][ws]") {
  struct Seen {
    std::string text;
    const void* owner;
    const char* data;
  };
  struct OwnerRecorder : detail::WireHandler {
    bool open = false;
    std::vector<Seen> events;
    void on_wire_open() override { open = true; }
    void on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) override {
      events.push_back({std::string(text), owner.get(), text.data()});
    }
  } recorder;
  detail::WsWire wire("127.0.0.1:1", "/", 1 << 20, recorder);
  wire.start();
  const std::string request = wire.output();
  std::string why;
  const auto first_owner = std::make_shared<std::string>();
  REQUIRE_FALSE(
      wire.receive(first_owner, upgrade_answer(request) + ws_frame(0x81, kHandshake), why));
  REQUIRE(recorder.open);
  const std::string a = ws_frame(0x81, "/a:0=\"" + std::string(300, 'a') + "\"");
  const std::string b = ws_frame(0x81, "/b:0=2");
  const std::string c = ws_frame(0x81, "/c:0=3");
  const std::string d = ws_frame(0x81, "/d:0=4");
  // Read 1: half of a. Read 2: the rest of a, b and c whole, d's first byte (its header split).
  // Read 3: the rest of d.
  const std::string read1 = a.substr(0, a.size() / 2);
  const std::string read2 = a.substr(a.size() / 2) + b + c + d.substr(0, 1);
  const std::string read3 = d.substr(1);
  REQUIRE_FALSE(wire.receive(first_owner, read1, why));
  CHECK(wire.partial_frame());
  const auto second_owner = std::make_shared<std::string>();
  REQUIRE_FALSE(wire.receive(second_owner, read2, why));
  CHECK(wire.partial_frame());
  REQUIRE_FALSE(wire.receive(first_owner, read3, why));
  CHECK_FALSE(wire.partial_frame());
  REQUIRE(recorder.events.size() == 4);
  CHECK(recorder.events[0].text == "/a:0=\"" + std::string(300, 'a') + "\"");
  CHECK(recorder.events[0].owner == nullptr);  // assembled: valid during the call only
  for (int i : {1, 2}) {
    CHECK(recorder.events[i].owner == second_owner.get());
    CHECK(recorder.events[i].data >= read2.data());
    CHECK(recorder.events[i].data < read2.data() + read2.size());
  }
  CHECK(recorder.events[1].text == "/b:0=2");
  CHECK(recorder.events[2].text == "/c:0=3");
  CHECK(recorder.events[3].text == "/d:0=4");
  CHECK(recorder.events[3].owner == nullptr);
}
