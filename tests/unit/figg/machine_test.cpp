// SPDX-License-Identifier: Apache-2.0
// Figg's client state machine without a socket, a clock or a completion: the publish window,
// cumulative ACKs, offsets, detach, and the resend order after a reconnect; bytes fed whole
// and one at a time.
#include <catch2/catch.hpp>

#include "figg/src/machine.hpp"
#include "polybus/error.hpp"

using namespace polybus;
using namespace polybus::figg;

namespace {

// The machine's handler: what it sent, as one byte string, and what it reported.
struct Recorder : MachineHandler {
  std::string wire;
  std::size_t acked = 0;
  std::vector<std::pair<std::string, std::uint64_t>> data;
  std::vector<std::string> attached;
  std::vector<std::uint64_t> pongs;
  std::error_code failure;
  void send(std::string bytes) override { wire += bytes; }
  void send(std::shared_ptr<const std::string> payload) override { wire += *payload; }
  void on_acked(std::size_t count) override { acked += count; }
  void on_data(const std::string& topic, std::uint64_t offset, std::string_view,
               const std::shared_ptr<const void>&) override {
    data.emplace_back(topic, offset);
  }
  void on_attached(const std::string& topic, std::uint64_t) override { attached.push_back(topic); }
  void on_log_reset(const std::string& topic, std::uint64_t resume_from,
                    std::uint64_t log_end) override {
    resets.push_back(topic + ":" + std::to_string(resume_from) + ">" + std::to_string(log_end));
  }
  std::vector<std::string> resets;
  void on_pong(std::uint64_t timestamp) override { pongs.push_back(timestamp); }
  void on_failure(std::error_code ec, const std::string&) override { failure = ec; }
};

// Decodes what the machine sent since the last call into "TYPE:topic:value" lines.
std::vector<std::string> decode(Recorder& r) {
  std::string wire = std::move(r.wire);
  r.wire.clear();
  std::vector<std::string> lines;
  FrameParser parser(1 << 20);
  std::string_view in = wire;
  while (!in.empty()) {
    Frame f;
    auto result = parser.feed(in, f);
    REQUIRE_FALSE(result.error);
    in.remove_prefix(result.consumed);
    if (!result.has_frame) continue;
    if (f.type == MessageType::attach) {
      Attach a;
      REQUIRE_FALSE(parse_attach(f.payload, a));
      lines.push_back("ATTACH:" + std::string(a.topic) + ":" +
                      (a.from_offset ? std::to_string(a.offset) : "latest"));
    } else if (f.type == MessageType::detach) {
      std::string_view t;
      REQUIRE_FALSE(parse_topic(f.payload, t));
      lines.push_back("DETACH:" + std::string(t));
    } else if (f.type == MessageType::publish) {
      Publish pub;
      REQUIRE_FALSE(parse_publish(f.payload, pub));
      lines.push_back("PUBLISH:" + std::string(pub.topic) + ":" + std::to_string(pub.seq));
    } else if (f.type == MessageType::ping) {
      lines.push_back("PING");
    }
  }
  return lines;
}

std::string frame_ack(std::uint64_t seq) {
  std::string s;
  append_ack(s, seq);
  return s;
}
std::string frame_data(const std::string& topic, std::uint64_t offset, const std::string& body) {
  std::string s;
  append_data_header(s, topic, offset, body.size());
  return s + body;
}
std::string frame_attached(const std::string& topic, std::uint64_t offset) {
  std::string s;
  append_attached(s, topic, offset);
  return s;
}
std::string frame_pong(std::uint64_t timestamp) {
  std::string s;
  append_pong(s, timestamp);
  return s;
}
std::string payload(const char* text) {
  return text;
}

}  // namespace

TEST_CASE("the window fills, and an ACK releases its message and every earlier one",
          "[figg][machine]") {
  Recorder r;
  Machine p(3, 1 << 20, r);
  p.connected();
  for (int i = 1; i <= 3; ++i) p.publish("t", payload("x"));
  CHECK(p.window_full());
  CHECK(decode(r) == std::vector<std::string>{"PUBLISH:t:1", "PUBLISH:t:2", "PUBLISH:t:3"});
  p.receive(nullptr, frame_ack(2));
  CHECK(r.acked == 2);
  CHECK(p.unacked() == 1);
  CHECK_FALSE(p.window_full());
  p.receive(nullptr, frame_ack(3));
  CHECK(r.acked == 3);
  CHECK_FALSE(r.failure);
}

TEST_CASE("small and large payloads go out whole, and again whole after a reconnect",
          "[figg][machine]") {
  // Either side of kSharedAbove: one kept by value and copied, one kept shared.
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.connected();
  const std::string small(KeptPayload::kSharedAbove, 's');
  const std::string large(KeptPayload::kSharedAbove + 1, 'L');
  p.publish("t", std::string(small));
  p.publish("t", std::string(large));
  const std::string first = r.wire;
  CHECK(first.find(small) != std::string::npos);
  CHECK(first.find(large) != std::string::npos);
  CHECK(first.find(small) < first.find(large));
  r.wire.clear();
  p.disconnected();
  p.connected();
  CHECK(r.wire == first);  // the resend: the same PUBLISHes, byte for byte
  p.receive(nullptr, frame_ack(2));
  CHECK(r.acked == 2);
}

TEST_CASE("an ACK beyond the last PUBLISH sent is a protocol error", "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.connected();
  p.publish("t", payload("x"));
  p.receive(nullptr, frame_ack(2));
  CHECK(r.failure == polybus::errc::protocol_error);
  CHECK(r.acked == 0);
}

TEST_CASE("nothing is sent while disconnected, a publish then waits for the connection",
          "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.publish("t", payload("x"));
  p.ping(1);
  CHECK(r.wire.empty());
  p.connected();
  CHECK(decode(r) == std::vector<std::string>{"PUBLISH:t:1"});
}

TEST_CASE("after a reconnect the resend follows the document's order", "[figg][machine]") {
  Recorder r;
  Machine p(16, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("attached", std::nullopt));
  REQUIRE_FALSE(p.attach("leaving", std::nullopt));
  p.receive(nullptr, frame_attached("attached", 0) + frame_attached("leaving", 0));
  p.receive(nullptr, frame_data("attached", 11, "bb"));
  p.publish("out", payload("1"));
  p.publish("out", payload("2"));
  p.detach("leaving");
  decode(r);
  p.disconnected();
  REQUIRE_FALSE(p.attach("pending", 5));  // while disconnected: waits for the connection
  p.connected();
  // An attached topic asks first where the log ends (ATTACH at latest); see the cases below.
  CHECK(decode(r) == std::vector<std::string>{"ATTACH:pending:5", "ATTACH:attached:latest",
                                              "DETACH:leaving", "PUBLISH:out:1", "PUBLISH:out:2"});
}

namespace {

// A machine attached to "t" whose last DATA was at offset 11, reconnected: it has asked where
// the log ends now.
void reconnect_after_offset_11(Machine& p, Recorder& r) {
  p.connected();
  REQUIRE_FALSE(p.attach("t", std::nullopt));
  p.receive(nullptr, frame_attached("t", 5));
  p.receive(nullptr, frame_data("t", 11, "bb"));
  p.disconnected();
  decode(r);
  r.data.clear();
  p.connected();
  REQUIRE(decode(r) == std::vector<std::string>{"ATTACH:t:latest"});
}

std::vector<std::uint64_t> offsets(const Recorder& r) {
  std::vector<std::uint64_t> out;
  for (const auto& [topic, offset] : r.data) out.push_back(offset);
  return out;
}

}  // namespace

TEST_CASE("a reconnect that missed nothing resumes with the one attachment", "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  reconnect_after_offset_11(p, r);
  p.receive(nullptr, frame_attached("t", 11));  // the log ends where this client was
  CHECK(decode(r).empty());
  p.receive(nullptr, frame_data("t", 15, "c"));
  CHECK(offsets(r) == std::vector<std::uint64_t>{15});
  CHECK(r.resets.empty());
}

TEST_CASE(
    "a reconnect that missed messages replays them once each, in order, though the live "
    "attachment runs ahead",
    "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  reconnect_after_offset_11(p, r);
  p.receive(nullptr, frame_attached("t", 23));  // two messages (15, 23) were published meanwhile
  CHECK(decode(r) == std::vector<std::string>{"ATTACH:t:11"});
  // The live attachment delivers a new message (28) before the replay has caught up ...
  p.receive(nullptr, frame_data("t", 28, "d"));
  p.receive(nullptr, frame_attached("t", 11));
  // ... the replay brings 15, 23 and then 28 again; the live copies of 28 and 33 come twice.
  p.receive(nullptr, frame_data("t", 15, "b") + frame_data("t", 23, "cccc") +
                         frame_data("t", 28, "d") + frame_data("t", 28, "d") +
                         frame_data("t", 33, "e") + frame_data("t", 33, "e"));
  CHECK(offsets(r) == std::vector<std::uint64_t>{15, 23, 28, 33});
  CHECK(p.offset("t") == 33u);
  CHECK(r.resets.empty());
  CHECK_FALSE(r.failure);
}

TEST_CASE(
    "a server that restarted and lost the log is said, and delivery resumes from its "
    "start",
    "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  reconnect_after_offset_11(p, r);
  // A restarted server starts every log at 0: this one holds one message (5) since.
  p.receive(nullptr, frame_attached("t", 5));
  CHECK(r.resets == std::vector<std::string>{"t:11>5"});
  CHECK(decode(r) == std::vector<std::string>{"ATTACH:t:0"});
  p.receive(nullptr, frame_attached("t", 0) + frame_data("t", 5, "a") + frame_data("t", 5, "a") +
                         frame_data("t", 11, "bb"));
  CHECK(offsets(r) == std::vector<std::uint64_t>{5, 11});
  // A second reconnect checks again, from the new position.
  p.disconnected();
  p.connected();
  CHECK(decode(r) == std::vector<std::string>{"ATTACH:t:latest"});
  p.receive(nullptr, frame_attached("t", 11));
  CHECK(decode(r).empty());
  CHECK(r.resets.size() == 1);
}

TEST_CASE("an attachment resumes from ATTACHED's offset until DATA moves it", "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("t", std::nullopt));
  p.receive(nullptr, frame_attached("t", 18));
  CHECK(p.offset("t") == 18u);
  p.receive(nullptr, frame_data("t", 25, "abc"));
  CHECK(p.offset("t") == 25u);
  CHECK(r.data.size() == 1);
}

TEST_CASE("DATA for a detached topic is dropped, a second attach is refused", "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("t", std::nullopt));
  CHECK(p.attach("t", std::nullopt) == polybus::errc::already_subscribed);
  p.receive(nullptr, frame_attached("t", 0));
  p.detach("t");
  p.receive(nullptr, frame_data("t", 5, "a"));  // the real server keeps sending
  CHECK(r.data.empty());
  CHECK_FALSE(p.attach("t", 5));  // may attach again after detaching
}

TEST_CASE("a malformed message from the server is a failure, not a crash", "[figg][machine]") {
  Recorder r;
  Machine p(4, 1 << 20, r);
  p.connected();
  std::string bad(
      "\x00\x07\x00\x01\x00\x00\x00\x03"
      "abc",
      11);  // DATA with a 3-byte payload
  p.receive(nullptr, bad);
  CHECK(r.failure == figg::errc::truncated_field);
  Recorder r2;
  Machine big(4, 16, r2);
  big.connected();
  big.receive(nullptr, frame_data("t", 1, std::string(100, 'x')));
  CHECK(r2.failure == figg::errc::frame_too_large);
}

TEST_CASE("abandon forgets the window: a later ACK releases nothing", "[figg][machine]") {
  Recorder r;
  Machine p(8, 1 << 20, r);
  p.connected();
  for (int i = 0; i < 5; ++i) p.publish("t", payload("x"));
  p.abandon();
  CHECK(p.unacked() == 0);
  p.receive(nullptr, frame_ack(5));
  CHECK(r.acked == 0);
  CHECK_FALSE(r.failure);
}

TEST_CASE("server bytes fed one at a time give what they give whole", "[figg][machine]") {
  auto run = [](bool byte_by_byte) {
    Recorder r;
    Machine p(8, 1 << 20, r);
    p.connected();
    REQUIRE_FALSE(p.attach("t", std::nullopt));
    for (int i = 0; i < 3; ++i) p.publish("t", payload("x"));
    p.ping(7);
    const std::string in = frame_attached("t", 4) + frame_data("t", 9, "hello") + frame_ack(2) +
                           frame_pong(7) + frame_data("t", 15, std::string(300, 'y')) +
                           frame_ack(3);
    if (byte_by_byte) {
      for (char c : in) p.receive(std::make_shared<std::string>(1, c), std::string_view(&c, 1));
    } else {
      p.receive(nullptr, in);
    }
    CHECK_FALSE(r.failure);
    CHECK(p.frames() == 6);
    CHECK_FALSE(p.partial_frame());
    return std::make_tuple(r.acked, r.data, r.attached, r.pongs, p.offset("t"));
  };
  auto whole = run(false);
  CHECK(std::get<0>(whole) == 3);
  CHECK(std::get<1>(whole).size() == 2);
  CHECK(std::get<4>(whole) == 15u);
  CHECK(run(true) == whole);
}
