// SPDX-License-Identifier: Apache-2.0
// Figg's codec: byte-exact encoders (the real server's example from the notes), split feeds,
// and hostile input.
#include <catch2/catch.hpp>
#include <random>

#include "polybus/figg/codec.hpp"

using namespace polybus::figg;

namespace {
std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}
}  // namespace

TEST_CASE("ATTACH at latest encodes exactly as the real server expects", "[figg][codec]") {
  std::string out;
  append_attach(out, "probe1", false, 0);
  // From ../shared/notes/figg.md: 0001 0001 00000014 | 0000 | 00000006 70726f626531 | 0 x8
  CHECK(hex(out) ==
        "0001000100000014"
        "0000"
        "00000006"
        "70726f626531"
        "0000000000000000");
  out.clear();
  append_attach(out, "t", true, 18);
  CHECK(hex(out).substr(16, 4) == "8000");
  CHECK(hex(out).substr(hex(out).size() - 16) == "0000000000000012");
}

TEST_CASE("every message type round-trips through the parser", "[figg][codec]") {
  std::string wire;
  append_attach(wire, "topic", true, 42);
  append_attached(wire, "topic", 42);
  append_detach(wire, "topic");
  append_detached(wire, "topic");
  append_publish_header(wire, "topic", 7, 3);
  wire += "abc";
  append_ack(wire, 7);
  append_data_header(wire, "topic", 50, 2);
  wire += "hi";
  append_ping(wire, 99);
  append_pong(wire, 99);
  FrameParser parser(1 << 20);
  std::vector<Frame> frames;
  std::vector<std::string> payloads;
  std::string_view input = wire;
  while (!input.empty()) {
    Frame f;
    auto r = parser.feed(input, f);
    REQUIRE_FALSE(r.error);
    input.remove_prefix(r.consumed);
    if (r.has_frame) {
      frames.push_back(f);
      payloads.emplace_back(f.payload);
    }
  }
  REQUIRE(frames.size() == 9);
  Attach a;
  REQUIRE_FALSE(parse_attach(payloads[0], a));
  CHECK(a.from_offset);
  CHECK(a.topic == "topic");
  CHECK(a.offset == 42);
  TopicOffset attached;
  REQUIRE_FALSE(parse_attached(payloads[1], attached));
  CHECK(attached.offset == 42);
  std::string_view topic;
  REQUIRE_FALSE(parse_topic(payloads[2], topic));
  CHECK(topic == "topic");
  Publish p;
  REQUIRE_FALSE(parse_publish(payloads[4], p));
  CHECK(p.seq == 7);
  CHECK(p.data == "abc");
  std::uint64_t seq = 0;
  REQUIRE_FALSE(parse_u64(payloads[5], seq));
  CHECK(seq == 7);
  Data d;
  REQUIRE_FALSE(parse_data(payloads[6], d));
  CHECK(d.offset == 50);
  CHECK(d.data == "hi");
  CHECK(frames[7].type == MessageType::ping);
  CHECK(frames[8].type == MessageType::pong);
}

TEST_CASE("frames fed in random splits come out whole and unchanged", "[figg][codec]") {
  std::mt19937 random(7);
  std::string wire;
  std::vector<std::string> bodies;
  for (int i = 0; i < 200; ++i) {
    std::string body(random() % 300, static_cast<char>('a' + i % 26));
    append_data_header(wire, "t" + std::to_string(i), static_cast<std::uint64_t>(i), body.size());
    wire += body;
    bodies.push_back(body);
  }
  FrameParser parser(1 << 20);
  std::size_t at = 0, index = 0;
  while (at < wire.size()) {
    std::size_t n = std::min<std::size_t>(wire.size() - at, 1 + random() % 50);
    std::string_view chunk(wire.data() + at, n);
    at += n;
    while (!chunk.empty()) {
      Frame f;
      auto r = parser.feed(chunk, f);
      REQUIRE_FALSE(r.error);
      chunk.remove_prefix(r.consumed);
      if (r.has_frame) {
        Data d;
        REQUIRE_FALSE(parse_data(f.payload, d));
        CHECK(d.data == bodies[index]);
        CHECK(d.offset == index);
        ++index;
      }
    }
  }
  CHECK(index == bodies.size());
}

TEST_CASE("an oversized frame is refused before any of it is buffered", "[figg][codec]") {
  FrameParser parser(1024);
  std::string header("\x00\x07\x00\x01\xff\xff\xff\xff", 8);
  Frame f;
  auto r = parser.feed(header, f);
  CHECK(r.error == errc::frame_too_large);
  CHECK(parser.feed("more", f).error == errc::frame_too_large);  // sticky
  parser.reset();
  std::string ok;
  append_ack(ok, 1);
  r = parser.feed(ok, f);
  CHECK_FALSE(r.error);
  CHECK(r.has_frame);
}

TEST_CASE("truncated, oversized and trailing fields are errors, never crashes", "[figg][codec]") {
  std::string attach;
  append_attach(attach, "topic", false, 0);
  std::string_view payload(attach.data() + kHeaderSize, attach.size() - kHeaderSize);
  Attach a;
  for (std::size_t cut = 0; cut < payload.size(); ++cut)
    CHECK(parse_attach(payload.substr(0, cut), a));
  CHECK(parse_attach(std::string(payload) + "x", a) == errc::trailing_bytes);
  // A field length far past the payload.
  std::string lying(
      "\x00\x00\x7f\xff\xff\xff"
      "abc",
      9);
  std::string_view topic;
  CHECK(parse_topic(lying, topic) == errc::truncated_field);
  Data d;
  CHECK(parse_data(std::string(12, '\xff'), d));
  std::uint64_t v;
  CHECK(parse_u64("1234567", v) == errc::truncated_field);
  CHECK(parse_u64("123456789", v) == errc::trailing_bytes);
  std::string empty_topic;
  append_detach(empty_topic, "");
  CHECK(parse_topic(std::string_view(empty_topic).substr(kHeaderSize), topic) ==
        errc::invalid_topic);
}
