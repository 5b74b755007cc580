// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "polybus/nsq/codec.hpp"
#include "polybus/nsq/error.hpp"

using namespace polybus::nsq;
using namespace std::string_literals;

namespace {

// ---------------------------------------------------------------------------------------------
// Wire builders, written independently of the codec so the tests check it against the protocol.

std::string be32(std::uint32_t value) {
  std::string bytes(4, '\0');
  for (int i = 3; i >= 0; --i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return bytes;
}

std::string be64(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return bytes;
}

std::string frame_bytes(std::uint32_t type, std::string_view body) {
  return be32(static_cast<std::uint32_t>(4 + body.size())) + be32(type) + std::string(body);
}

std::string message_body(std::uint64_t timestamp, std::uint16_t attempts, std::string_view id,
                         std::string_view body) {
  std::string bytes = be64(timestamp);
  bytes += static_cast<char>(attempts >> 8);
  bytes += static_cast<char>(attempts & 0xff);
  bytes += id;
  bytes += body;
  return bytes;
}

constexpr std::string_view kId = "0a1b2c3d4e5f6789";

struct ParsedFrame {
  FrameType type;
  std::string body;
  bool operator==(const ParsedFrame& other) const {
    return type == other.type && body == other.body;
  }
};

struct FeedOutcome {
  std::vector<ParsedFrame> frames;
  std::error_code error;
};

// Feeds `stream` cut at the given chunk sizes (the last chunk takes the rest). Every chunk is a
// separate heap string freed after use, so ASan catches a frame that outlives its chunk.
FeedOutcome feed_chunks(FrameParser& parser, std::string_view stream,
                        const std::vector<std::size_t>& chunk_sizes) {
  FeedOutcome outcome;
  std::size_t offset = 0;
  std::size_t next_size = 0;
  while (offset < stream.size()) {
    const std::size_t size =
        next_size < chunk_sizes.size() ? chunk_sizes[next_size++] : stream.size() - offset;
    const std::string chunk(stream.substr(offset, size));
    offset += chunk.size();
    std::string_view input = chunk;
    while (!input.empty()) {
      Frame frame;
      const auto result = parser.feed(input, frame);
      if (result.error) {
        outcome.error = result.error;
        return outcome;
      }
      // Checked only on failure, so that the assertion count reflects the tests, not the bytes.
      if ((result.consumed == 0 && !result.has_frame) || result.consumed > input.size()) {
        FAIL("feed() made no progress or consumed more than it was given");
      }
      input.remove_prefix(result.consumed);
      if (result.has_frame) outcome.frames.push_back({frame.type, std::string(frame.body)});
    }
  }
  return outcome;
}

std::vector<std::size_t> one_byte_chunks(std::size_t total) {
  return std::vector<std::size_t>(total, 1);
}

// Deterministic across standard libraries: only mt19937's raw output is used.
std::vector<std::size_t> random_chunks(std::size_t total, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::size_t> sizes;
  std::size_t covered = 0;
  while (covered < total) {
    // Mostly small cuts (splitting headers), sometimes large ones (whole frames in a chunk).
    const std::size_t size = rng() % 4 == 0 ? 1 + rng() % 64 : 1 + rng() % 7;
    sizes.push_back(size);
    covered += size;
  }
  return sizes;
}

// A stream with every frame type, an empty body, binary bytes and a larger message.
struct SampleStream {
  std::string bytes;
  std::vector<ParsedFrame> frames;
};

SampleStream sample_stream() {
  SampleStream sample;
  const auto add = [&sample](FrameType type, const std::string& body) {
    sample.bytes += frame_bytes(static_cast<std::uint32_t>(type), body);
    sample.frames.push_back({type, body});
  };
  add(FrameType::response, "OK");
  add(FrameType::response, "_heartbeat_");
  add(FrameType::error, "E_FIN_FAILED FIN 0a1b2c3d4e5f6789 failed");
  add(FrameType::response, "");
  add(FrameType::message, message_body(1700000000123456789ULL, 1, kId, "hello"));
  add(FrameType::message, message_body(42, 3, kId, "bin\0\n\xff"s));
  add(FrameType::message, message_body(7, 65535, kId, std::string(1000, 'x')));
  add(FrameType::response, "CLOSE_WAIT");
  return sample;
}

// The first error feeding `stream` to a fresh parser, with how many bytes were consumed.
std::pair<std::error_code, std::size_t> first_error(std::string_view stream,
                                                    std::size_t max_frame_size = 1024) {
  FrameParser parser(max_frame_size);
  std::size_t consumed = 0;
  while (consumed < stream.size()) {
    Frame frame;
    const auto result = parser.feed(stream.substr(consumed), frame);
    consumed += result.consumed;
    if (result.error) return {result.error, consumed};
  }
  return {{}, consumed};
}

}  // namespace

// =============================================================================================
// Error category

TEST_CASE("nsq errors convert to std::error_code in the nsq category", "[nsq][error]") {
  const std::error_code code = errc::invalid_name;
  CHECK(code.category() == nsq_category());
  CHECK(std::string(nsq_category().name()) == "nsq");
  CHECK(code == make_error_code(errc::invalid_name));
  CHECK(code.value() != 0);
  CHECK(code.message().find("name") != std::string::npos);
}

TEST_CASE("every nsq error code has its own message", "[nsq][error]") {
  std::set<std::string> messages;
  const int first = static_cast<int>(errc::bad_frame_size);
  const int last = static_cast<int>(errc::unknown_server_error);
  for (int value = first; value <= last; ++value) {
    const std::string message = make_error_code(static_cast<errc>(value)).message();
    CHECK(message.find("unknown nsq error") == std::string::npos);
    CHECK(messages.insert(message).second);
  }
  CHECK(make_error_code(errc::e_auth_first).message().find("E_AUTH_FIRST") != std::string::npos);
  CHECK(nsq_category().message(9999).find("9999") != std::string::npos);
}

// =============================================================================================
// Names

TEST_CASE("topic and channel names follow nsqd 1.3's rule", "[nsq][names]") {
  const std::string longest(64, 'a');
  const std::string longest_ephemeral = std::string(54, 'b') + "#ephemeral";
  REQUIRE(longest_ephemeral.size() == 64);
  for (const std::string& name :
       {"a"s, "orders"s, "a.b_c-D9"s, longest, "x#ephemeral"s, longest_ephemeral, "..."s, "-_-"s}) {
    INFO(name);
    CHECK(valid_topic_name(name));
    CHECK(valid_channel_name(name));
  }
  for (const std::string& name :
       {""s, std::string(65, 'a'), std::string(55, 'b') + "#ephemeral", "#ephemeral"s, "a b"s,
        "a\n"s, "a/b"s, "a#eph"s, "a#ephemeral#ephemeral"s, "a#EPHEMERAL"s, "caf\xc3\xa9"s, "a\0b"s,
        "a\r"s, "a:b"s}) {
    INFO(name);
    CHECK_FALSE(valid_topic_name(name));
    CHECK_FALSE(valid_channel_name(name));
  }
}

// =============================================================================================
// Encoders

TEST_CASE("magic is two spaces then V2", "[nsq][encode]") {
  std::string out;
  append_magic(out);
  CHECK(out == "  V2");
}

TEST_CASE("encoders append to what the buffer already holds", "[nsq][encode]") {
  std::string out = "  V2";
  append_nop(out);
  REQUIRE_FALSE(append_sub(out, "t", "c"));
  append_rdy(out, 1);
  CHECK(out == "  V2NOP\nSUB t c\nRDY 1\n");
}

TEST_CASE("IDENTIFY is the command line, a 4-byte big-endian size and the JSON", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_identify(out, R"({"feature_negotiation":true})"));
  CHECK(out ==
        "IDENTIFY\n\x00\x00\x00\x1c"s
        R"({"feature_negotiation":true})");
}

TEST_CASE("AUTH carries the secret size-prefixed", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_auth(out, "s3cr\0t"s));
  CHECK(out == "AUTH\n\x00\x00\x00\x06s3cr\0t"s);
}

TEST_CASE("IDENTIFY and AUTH refuse empty bodies, which nsqd rejects", "[nsq][encode]") {
  std::string out = "keep";
  CHECK(append_identify(out, "") == errc::empty_body);
  CHECK(append_auth(out, "") == errc::empty_body);
  CHECK(out == "keep");
}

TEST_CASE("SUB names topic and channel on one line", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_sub(out, "orders", "billing#ephemeral"));
  CHECK(out == "SUB orders billing#ephemeral\n");
}

TEST_CASE("SUB refuses invalid names and leaves the buffer untouched", "[nsq][encode]") {
  std::string out = "keep";
  CHECK(append_sub(out, "bad topic", "c") == errc::invalid_name);
  CHECK(append_sub(out, "t", "c\nPUB x") == errc::invalid_name);
  CHECK(append_sub(out, "", "c") == errc::invalid_name);
  CHECK(out == "keep");
}

TEST_CASE("RDY writes the count in decimal", "[nsq][encode]") {
  std::string out;
  append_rdy(out, 0);
  append_rdy(out, 2500);
  append_rdy(out, 4294967295u);
  CHECK(out == "RDY 0\nRDY 2500\nRDY 4294967295\n");
}

TEST_CASE("FIN, REQ and TOUCH carry the 16-byte message id", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_fin(out, kId));
  REQUIRE_FALSE(append_req(out, kId, 0));
  REQUIRE_FALSE(append_req(out, kId, 3600000));
  REQUIRE_FALSE(append_touch(out, kId));
  CHECK(out ==
        "FIN 0a1b2c3d4e5f6789\n"
        "REQ 0a1b2c3d4e5f6789 0\n"
        "REQ 0a1b2c3d4e5f6789 3600000\n"
        "TOUCH 0a1b2c3d4e5f6789\n");
}

TEST_CASE("FIN, REQ and TOUCH refuse ids that are not 16 printable bytes", "[nsq][encode]") {
  std::string out = "keep";
  for (const std::string& id :
       {""s, "0a1b2c3d4e5f678"s, "0a1b2c3d4e5f67890"s, "0a1b2c3d 4e5f678"s, "0a1b2c3d\n4e5f678"s,
        "0a1b2c3d\0004e5f678"s, "0a1b2c3d4e5f678\x7f"s, "0a1b2c3d4e5f678\xc3"s}) {
    INFO(id);
    CHECK(append_fin(out, id) == errc::invalid_message_id);
    CHECK(append_req(out, id, 10) == errc::invalid_message_id);
    CHECK(append_touch(out, id) == errc::invalid_message_id);
  }
  CHECK(out == "keep");
}

// The id is checked eight bytes at a time: every byte value, at every place of an id, and next to
// each of the ends of the printable range, must be taken or refused as the plain rule says.
TEST_CASE("FIN takes an id exactly when its 16 bytes are all printable, whatever byte is where",
          "[nsq][encode]") {
  const std::string good = "0a1b2c3d4e5f6789";
  std::size_t checked = 0;
  for (std::size_t at = 0; at < good.size(); ++at)
    for (int b = 0; b < 256; ++b)
      for (char neighbour : {'0', '!', '~'}) {
        std::string id = good;
        id[at] = static_cast<char>(b);
        if (at + 1 < id.size()) id[at + 1] = neighbour;
        const bool printable = b > ' ' && b <= '~';
        std::string out;
        INFO("byte " << b << " at " << at << " before '" << neighbour << "'");
        CHECK((append_fin(out, id) == errc::invalid_message_id) == !printable);
        ++checked;
      }
  CHECK(checked == 16 * 256 * 3);
}

TEST_CASE("names take exactly a-z A-Z 0-9 . _ -, whatever byte is where", "[nsq][names]") {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    for (const std::string& name :
         {std::string(1, c), "ab" + std::string(1, c) + "cd", std::string(1, c) + "#ephemeral"}) {
      INFO("byte " << b);
      CHECK(valid_topic_name(name) == allowed);
      CHECK(valid_channel_name(name) == allowed);
    }
  }
}

TEST_CASE("CLS and NOP are bare command lines", "[nsq][encode]") {
  std::string out;
  append_cls(out);
  append_nop(out);
  CHECK(out == "CLS\nNOP\n");
}

TEST_CASE("PUB is the topic line, the body size and the body bytes", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_pub(out, "orders", "hello"));
  CHECK(out == "PUB orders\n\x00\x00\x00\x05hello"s);

  std::string binary;
  const std::string body = "\0\n\r\xff"s + std::string(300, 'z');
  REQUIRE_FALSE(append_pub(binary, "t", body));
  CHECK(binary == "PUB t\n" + be32(304) + body);
}

TEST_CASE("PUB header is PUB without the body, for gather writes", "[nsq][encode]") {
  std::string full;
  std::string header;
  REQUIRE_FALSE(append_pub(full, "orders", "hello world"));
  REQUIRE_FALSE(append_pub_header(header, "orders", 11));
  CHECK(header == "PUB orders\n" + be32(11));
  CHECK(header + "hello world" == full);
}

TEST_CASE("PUB refuses a bad topic, an empty body and a size over int32", "[nsq][encode]") {
  std::string out = "keep";
  CHECK(append_pub(out, "no spaces", "x") == errc::invalid_name);
  CHECK(append_pub(out, "t", "") == errc::empty_body);
  CHECK(append_pub_header(out, "t", 0) == errc::empty_body);
  CHECK(append_pub_header(out, "t", kMaxWireSize + 1) == errc::body_too_large);
  CHECK(out == "keep");
  REQUIRE_FALSE(append_pub_header(out, "t", kMaxWireSize));
  CHECK(out == "keepPUB t\n\x7f\xff\xff\xff"s);
}

TEST_CASE("DPUB adds the defer time in milliseconds", "[nsq][encode]") {
  std::string out;
  REQUIRE_FALSE(append_dpub(out, "orders", 5000, "later"));
  CHECK(out == "DPUB orders 5000\n\x00\x00\x00\x05later"s);

  std::string header;
  REQUIRE_FALSE(append_dpub_header(header, "orders", 5000, 5));
  CHECK(header + "later" == out);

  std::string zero;
  REQUIRE_FALSE(append_dpub(zero, "t", 0, "x"));
  CHECK(zero == "DPUB t 0\n\x00\x00\x00\x01x"s);
}

TEST_CASE("DPUB refuses what PUB refuses", "[nsq][encode]") {
  std::string out = "keep";
  CHECK(append_dpub(out, "t!", 1, "x") == errc::invalid_name);
  CHECK(append_dpub(out, "t", 1, "") == errc::empty_body);
  CHECK(append_dpub_header(out, "t", 1, kMaxWireSize + 1) == errc::body_too_large);
  CHECK(out == "keep");
}

TEST_CASE("MPUB counts the messages and size-prefixes each", "[nsq][encode]") {
  const std::vector<std::string> bodies = {"a", "bc", "\0\n"s};
  // Body size: 4 (count) + (4 + 1) + (4 + 2) + (4 + 2) = 21.
  const std::string expected =
      "MPUB orders\n"s + be32(21) + be32(3) + be32(1) + "a" + be32(2) + "bc" + be32(2) + "\0\n"s;
  std::string out;
  REQUIRE_FALSE(append_mpub(out, "orders", bodies));
  CHECK(out == expected);
  CHECK(out ==
        "MPUB orders\n\x00\x00\x00\x15\x00\x00\x00\x03\x00\x00\x00\x01"
        "a\x00\x00\x00\x02"
        "bc\x00\x00\x00\x02\x00\n"s);

  const std::vector<std::string_view> views(bodies.begin(), bodies.end());
  std::string from_views;
  REQUIRE_FALSE(append_mpub(from_views, "orders", views));
  CHECK(from_views == expected);
}

TEST_CASE("MPUB header and size prefixes rebuild MPUB without copying bodies", "[nsq][encode]") {
  const std::vector<std::string_view> bodies = {"first", "second message", "3"};
  std::string full;
  REQUIRE_FALSE(append_mpub(full, "t", bodies));

  std::string header;
  REQUIRE_FALSE(append_mpub_header(header, "t", bodies));
  CHECK(header == "MPUB t\n" + be32(4 + 9 + 18 + 5) + be32(3));
  std::string rebuilt = header;
  for (const auto body : bodies) {
    append_size_prefix(rebuilt, static_cast<std::uint32_t>(body.size()));
    rebuilt += body;
  }
  CHECK(rebuilt == full);
}

TEST_CASE("MPUB gather pieces point at the caller's bodies and concatenate to MPUB",
          "[nsq][encode]") {
  const std::vector<std::string> storage = {"alpha", "beta", std::string(100, 'g')};
  const std::vector<std::string_view> bodies(storage.begin(), storage.end());
  std::string scratch = "old contents are replaced";
  std::vector<std::string_view> pieces = {"stale"};
  REQUIRE_FALSE(mpub_gather("t", bodies, scratch, pieces));

  REQUIRE(pieces.size() == 1 + 2 * bodies.size());
  std::string joined;
  for (const auto piece : pieces) joined += piece;
  std::string full;
  REQUIRE_FALSE(append_mpub(full, "t", bodies));
  CHECK(joined == full);
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    CHECK(pieces[2 + 2 * i].data() == storage[i].data());  // not copied
    CHECK(pieces[1 + 2 * i] == be32(static_cast<std::uint32_t>(storage[i].size())));
  }
  CHECK(scratch.size() == pieces[0].size() + 4 * bodies.size());
}

TEST_CASE("MPUB refuses a bad topic, no messages and an empty message", "[nsq][encode]") {
  std::string out = "keep";
  std::string scratch = "scratch";
  std::vector<std::string_view> pieces = {"piece"};
  const std::vector<std::string_view> none;
  const std::vector<std::string_view> with_empty = {"a", "", "b"};
  CHECK(append_mpub(out, "bad/topic", std::vector<std::string>{"a"}) == errc::invalid_name);
  CHECK(append_mpub(out, "t", none) == errc::empty_body);
  CHECK(append_mpub(out, "t", with_empty) == errc::empty_body);
  CHECK(append_mpub_header(out, "t", with_empty) == errc::empty_body);
  CHECK(mpub_gather("t", none, scratch, pieces) == errc::empty_body);
  CHECK(out == "keep");
  CHECK(scratch == "scratch");
  CHECK(pieces == std::vector<std::string_view>{"piece"});
}

TEST_CASE("MPUB accepts a body of exactly int32 max and refuses one byte more", "[nsq][encode]") {
  // 127 views of 16 MiB plus one sized so that 4 + sum(4 + size) == 2^31 - 1. Only views, so the
  // 2 GiB are never materialised.
  const std::string block(std::size_t{1} << 24, 'm');
  std::vector<std::string_view> bodies(127, std::string_view(block));
  const std::size_t fixed = 4 + 128 * 4 + 127 * block.size();
  bodies.emplace_back(block.data(), kMaxWireSize - fixed);

  std::string header;
  REQUIRE_FALSE(append_mpub_header(header, "t", bodies));
  CHECK(header == "MPUB t\n" + be32(0x7fffffff) + be32(128));

  bodies.back() = std::string_view(block.data(), bodies.back().size() + 1);
  std::string refused;
  CHECK(append_mpub_header(refused, "t", bodies) == errc::body_too_large);
  CHECK(refused.empty());

  // A batch that would wrap a 32-bit sum is also refused.
  std::vector<std::string_view> huge(300, std::string_view(block));
  CHECK(append_mpub_header(refused, "t", huge) == errc::body_too_large);
}

// =============================================================================================
// Frame parser

TEST_CASE("frames fed whole come out in order as views into the input", "[nsq][frames]") {
  const auto sample = sample_stream();
  FrameParser parser(4096);
  std::string_view input = sample.bytes;
  std::vector<ParsedFrame> frames;
  while (!input.empty()) {
    Frame frame;
    const auto result = parser.feed(input, frame);
    REQUIRE_FALSE(result.error);
    REQUIRE(result.has_frame);
    // Zero copy: the body lies inside the caller's buffer.
    CHECK(frame.body.data() >= sample.bytes.data());
    CHECK(frame.body.data() + frame.body.size() <= sample.bytes.data() + sample.bytes.size());
    CHECK_FALSE(frame.in_parser_buffer);
    frames.push_back({frame.type, std::string(frame.body)});
    input.remove_prefix(result.consumed);
    CHECK(parser.idle());
  }
  CHECK(frames == sample.frames);
  CHECK(parser.buffer_capacity() == 0);
}

TEST_CASE("frames fed one byte at a time come out intact", "[nsq][frames]") {
  const auto sample = sample_stream();
  FrameParser parser(4096);
  const auto outcome = feed_chunks(parser, sample.bytes, one_byte_chunks(sample.bytes.size()));
  CHECK_FALSE(outcome.error);
  CHECK(outcome.frames == sample.frames);
  CHECK(parser.idle());
}

TEST_CASE("frames fed in random splits come out intact", "[nsq][frames]") {
  const auto sample = sample_stream();
  for (std::uint32_t seed = 1; seed <= 200; ++seed) {
    INFO("seed " << seed);
    FrameParser parser(4096);
    const auto outcome =
        feed_chunks(parser, sample.bytes, random_chunks(sample.bytes.size(), seed));
    REQUIRE_FALSE(outcome.error);
    REQUIRE(outcome.frames == sample.frames);
    CHECK(parser.idle());
    CHECK(parser.buffer_capacity() <= 4096);
  }
}

TEST_CASE("feeding nothing consumes nothing and yields no frame", "[nsq][frames]") {
  FrameParser parser(1024);
  Frame frame;
  const auto result = parser.feed({}, frame);
  CHECK(result.consumed == 0);
  CHECK_FALSE(result.has_frame);
  CHECK_FALSE(result.error);
  CHECK(parser.idle());
}

TEST_CASE("one feed returns one frame and leaves the rest for the next call", "[nsq][frames]") {
  const std::string stream = frame_bytes(0, "OK") + frame_bytes(0, "second");
  FrameParser parser(1024);
  Frame frame;
  const auto first = parser.feed(stream, frame);
  REQUIRE(first.has_frame);
  CHECK(first.consumed == 10);
  CHECK(frame.body == "OK");
  const auto second = parser.feed(std::string_view(stream).substr(first.consumed), frame);
  REQUIRE(second.has_frame);
  CHECK(frame.body == "second");
}

TEST_CASE("a split header with the body whole in the next chunk still avoids a copy",
          "[nsq][frames]") {
  const std::string stream = frame_bytes(0, "response body");
  FrameParser parser(1024);
  Frame frame;
  const auto head = parser.feed(std::string_view(stream).substr(0, 5), frame);
  CHECK(head.consumed == 5);
  CHECK_FALSE(head.has_frame);
  CHECK_FALSE(parser.idle());
  const std::string_view rest = std::string_view(stream).substr(5);
  const auto tail = parser.feed(rest, frame);
  REQUIRE(tail.has_frame);
  CHECK(frame.body == "response body");
  CHECK(frame.body.data() == rest.data() + 3);
  CHECK_FALSE(frame.in_parser_buffer);
  CHECK(parser.buffer_capacity() == 0);
}

TEST_CASE("a body split across chunks is copied into a buffer of exactly its size",
          "[nsq][frames]") {
  const std::string body(100, 'b');
  const std::string stream = frame_bytes(0, body);
  FrameParser parser(1024);
  Frame frame;
  // Header alone: nothing is allocated before body bytes arrive.
  CHECK(parser.feed(std::string_view(stream).substr(0, 8), frame).consumed == 8);
  CHECK(parser.buffer_capacity() == 0);
  CHECK(parser.feed(std::string_view(stream).substr(8, 30), frame).consumed == 30);
  CHECK(parser.buffer_capacity() == 100);
  const auto last = parser.feed(std::string_view(stream).substr(38), frame);
  REQUIRE(last.has_frame);
  CHECK(frame.body == body);
  CHECK(frame.in_parser_buffer);

  parser.reset();
  CHECK(parser.buffer_capacity() == 0);
}

TEST_CASE("a frame of exactly max_frame_size is accepted", "[nsq][frames]") {
  const std::string body(96, 'x');  // size field 100
  FrameParser parser(100);
  const auto outcome = feed_chunks(parser, frame_bytes(0, body), {8, 50});
  CHECK_FALSE(outcome.error);
  REQUIRE(outcome.frames.size() == 1);
  CHECK(outcome.frames[0].body == body);
  CHECK(parser.buffer_capacity() <= 100);
}

TEST_CASE("a size field over max_frame_size is refused before anything is buffered",
          "[nsq][frames][hostile]") {
  FrameParser parser(100);
  Frame frame;
  // Only the 4 size bytes of a 101-byte frame: refused right there.
  const auto result = parser.feed(be32(101), frame);
  CHECK(result.error == errc::frame_too_large);
  CHECK(result.consumed == 4);
  CHECK(parser.buffer_capacity() == 0);

  const auto [error, consumed] = first_error(be32(0x7fffffff) + be32(2) + "xyz", 1 << 20);
  CHECK(error == errc::frame_too_large);
  CHECK(consumed <= kFrameHeaderSize);
}

TEST_CASE("a size field below 4 is a bad frame size", "[nsq][frames][hostile]") {
  for (std::uint32_t size : {0u, 1u, 2u, 3u}) {
    INFO(size);
    const auto [error, consumed] = first_error(be32(size) + be32(0) + "rest");
    CHECK(error == errc::bad_frame_size);
    CHECK(consumed <= kFrameHeaderSize);
    CHECK(first_error(be32(size)).first == errc::bad_frame_size);  // known from 4 bytes
  }
}

TEST_CASE("a negative size field is a bad frame size, not a huge one", "[nsq][frames][hostile]") {
  for (std::uint32_t size : {0xffffffffu, 0x80000000u, 0xfffffffcu}) {
    INFO(size);
    // Even a parser without a practical bound must not read these as 4 GiB.
    const auto [error, consumed] = first_error(be32(size) + be32(0), SIZE_MAX);
    CHECK(error == errc::bad_frame_size);
    CHECK(consumed <= kFrameHeaderSize);
    CHECK(first_error(be32(size), SIZE_MAX).first == errc::bad_frame_size);
  }
}

TEST_CASE("an unknown frame type is refused", "[nsq][frames][hostile]") {
  for (std::uint32_t type : {3u, 4u, 0x7fffffffu, 0xffffffffu, 0x80000000u}) {
    INFO(type);
    const auto [error, consumed] = first_error(frame_bytes(type, "body"));
    CHECK(error == errc::unknown_frame_type);
    CHECK(consumed == 8);
  }
}

TEST_CASE("a message frame too short for the message header is truncated",
          "[nsq][frames][hostile]") {
  for (std::size_t body_size : {0, 1, 10, 25}) {
    INFO(body_size);
    const auto [error, consumed] = first_error(frame_bytes(2, std::string(body_size, 'm')));
    CHECK(error == errc::truncated_message);
    CHECK(consumed == 8);  // refused on the header, before the body is read
  }
  const auto [error, consumed] = first_error(frame_bytes(2, std::string(26, 'm')));
  CHECK_FALSE(error);
  CHECK(consumed == 34);
}

TEST_CASE("hostile headers are refused whichever way they are split", "[nsq][frames][hostile]") {
  const std::vector<std::pair<std::string, errc>> cases = {
      {be32(3) + be32(0), errc::bad_frame_size},
      {be32(0xffffffff) + be32(0), errc::bad_frame_size},
      {be32(5000) + be32(0), errc::frame_too_large},
      {be32(10) + be32(9) + "123456", errc::unknown_frame_type},
      {be32(20) + be32(2) + std::string(16, 'm'), errc::truncated_message},
  };
  for (const auto& [stream, expected] : cases) {
    for (std::uint32_t seed = 1; seed <= 20; ++seed) {
      FrameParser parser(1024);
      const auto prefix = frame_bytes(0, "OK");
      const auto outcome =
          feed_chunks(parser, prefix + stream, random_chunks(prefix.size() + stream.size(), seed));
      CHECK(outcome.error == expected);
      CHECK(outcome.frames.size() == 1);     // the valid frame before it still came out
      CHECK(parser.buffer_capacity() <= 2);  // at most that frame's split body
    }
  }
}

TEST_CASE("a framing error is sticky until reset", "[nsq][frames][hostile]") {
  FrameParser parser(1024);
  Frame frame;
  CHECK(parser.feed(be32(1) + be32(0), frame).error == errc::bad_frame_size);
  CHECK_FALSE(parser.idle());
  const auto again = parser.feed(frame_bytes(0, "OK"), frame);
  CHECK(again.error == errc::bad_frame_size);
  CHECK(again.consumed == 0);
  CHECK_FALSE(again.has_frame);

  parser.reset();
  CHECK(parser.idle());
  const std::string ok_frame = frame_bytes(0, "OK");  // outlives the view into it
  const auto after_reset = parser.feed(ok_frame, frame);
  CHECK_FALSE(after_reset.error);
  REQUIRE(after_reset.has_frame);
  CHECK(frame.body == "OK");
}

TEST_CASE("idle is false while a partial frame is held", "[nsq][frames]") {
  const std::string stream = frame_bytes(0, "OK");
  FrameParser parser(1024);
  Frame frame;
  CHECK(parser.idle());
  parser.feed(std::string_view(stream).substr(0, 3), frame);
  CHECK_FALSE(parser.idle());
  parser.feed(std::string_view(stream).substr(3, 6), frame);
  CHECK_FALSE(parser.idle());
  CHECK(parser.feed(std::string_view(stream).substr(9), frame).has_frame);
  CHECK(parser.idle());
}

TEST_CASE("random garbage never crashes the parser or grows it past its bound",
          "[nsq][frames][hostile]") {
  constexpr std::size_t kMax = 512;
  std::mt19937 rng(20240611);
  for (int round = 0; round < 500; ++round) {
    std::string garbage(1 + rng() % 2048, '\0');
    for (auto& byte : garbage) byte = static_cast<char>(rng() & 0xff);
    // Some rounds use plausible headers so that bodies actually get buffered.
    if (round % 2 == 0) {
      const std::string header = be32(4 + rng() % (kMax - 3)) + be32(rng() % 3);
      garbage.replace(0, 8, header);
    }
    FrameParser parser(kMax);
    const auto outcome = feed_chunks(
        parser, garbage, random_chunks(garbage.size(), static_cast<std::uint32_t>(round)));
    CHECK(parser.buffer_capacity() <= kMax);
    for (const auto& frame : outcome.frames) CHECK(frame.body.size() <= kMax - 4);
  }
}

TEST_CASE("a corrupted byte anywhere in a valid stream is refused or parsed, never crashes",
          "[nsq][frames][hostile]") {
  const auto sample = sample_stream();
  for (std::size_t position = 0; position < sample.bytes.size(); position += 7) {
    for (const char bad : {'\x00', '\x7f', '\x80', '\xff'}) {
      std::string corrupted = sample.bytes;
      corrupted[position] = bad;
      FrameParser parser(2048);
      const auto outcome = feed_chunks(
          parser, corrupted, random_chunks(corrupted.size(), static_cast<std::uint32_t>(position)));
      CHECK(parser.buffer_capacity() <= 2048);
      CHECK(outcome.frames.size() <= sample.frames.size() + corrupted.size() / 8);
    }
  }
}

// =============================================================================================
// Messages

TEST_CASE("a message frame body splits into timestamp, attempts, id and body", "[nsq][message]") {
  const std::string frame_body = message_body(1700000000123456789ULL, 3, kId, "payload\0"s);
  MessageView message;
  REQUIRE_FALSE(parse_message(frame_body, message));
  CHECK(message.timestamp_ns == 1700000000123456789LL);
  CHECK(message.attempts == 3);
  CHECK(message.id == kId);
  CHECK(message.body == "payload\0"s);
  CHECK(message.body.data() == frame_body.data() + 26);
}

TEST_CASE("message header fields use their full ranges", "[nsq][message]") {
  MessageView message;
  REQUIRE_FALSE(parse_message(message_body(0xffffffffffffffffULL, 0xffff, kId, ""), message));
  CHECK(message.timestamp_ns == -1);
  CHECK(message.attempts == 65535);
  CHECK(message.body.empty());

  REQUIRE_FALSE(parse_message(message_body(0x8000000000000000ULL, 0x0102, kId, "b"), message));
  CHECK(message.timestamp_ns == INT64_MIN);
  CHECK(message.attempts == 258);
}

TEST_CASE("a message body shorter than 26 bytes is truncated", "[nsq][message][hostile]") {
  MessageView message;
  message.attempts = 9;
  CHECK(parse_message("", message) == errc::truncated_message);
  CHECK(parse_message(std::string(25, 'x'), message) == errc::truncated_message);
  CHECK(message.attempts == 9);  // untouched
}

TEST_CASE("a parsed message id can be sent back in FIN", "[nsq][message]") {
  const std::string frame_body = message_body(1, 1, kId, "x");
  MessageView message;
  REQUIRE_FALSE(parse_message(frame_body, message));
  std::string out;
  REQUIRE_FALSE(append_fin(out, message.id));
  CHECK(out == "FIN 0a1b2c3d4e5f6789\n");
}

// =============================================================================================
// Responses and error frames

TEST_CASE("heartbeat, OK and CLOSE_WAIT responses are recognised exactly", "[nsq][response]") {
  CHECK(is_heartbeat("_heartbeat_"));
  CHECK_FALSE(is_heartbeat("_heartbeat_ "));
  CHECK_FALSE(is_heartbeat("OK"));
  CHECK(is_ok("OK"));
  CHECK_FALSE(is_ok("ok"));
  CHECK_FALSE(is_ok("OK\n"));
  CHECK(is_close_wait("CLOSE_WAIT"));
  CHECK_FALSE(is_close_wait("CLOSE"));
  CHECK(is_heartbeat(Frame{FrameType::response, "_heartbeat_", false}));
  CHECK_FALSE(is_heartbeat(Frame{FrameType::error, "_heartbeat_", false}));
}

TEST_CASE("every nsqd error code maps to its own errc", "[nsq][server-error]") {
  const std::vector<std::pair<std::string, errc>> codes = {
      {"E_INVALID", errc::e_invalid},
      {"E_BAD_BODY", errc::e_bad_body},
      {"E_BAD_TOPIC", errc::e_bad_topic},
      {"E_BAD_CHANNEL", errc::e_bad_channel},
      {"E_BAD_MESSAGE", errc::e_bad_message},
      {"E_PUB_FAILED", errc::e_pub_failed},
      {"E_MPUB_FAILED", errc::e_mpub_failed},
      {"E_DPUB_FAILED", errc::e_dpub_failed},
      {"E_FIN_FAILED", errc::e_fin_failed},
      {"E_REQ_FAILED", errc::e_req_failed},
      {"E_TOUCH_FAILED", errc::e_touch_failed},
      {"E_SUB_FAILED", errc::e_sub_failed},
      {"E_IDENTIFY_FAILED", errc::e_identify_failed},
      {"E_AUTH_FAILED", errc::e_auth_failed},
      {"E_AUTH_ERROR", errc::e_auth_error},
      {"E_AUTH_FIRST", errc::e_auth_first},
      {"E_AUTH_DISABLED", errc::e_auth_disabled},
      {"E_UNAUTHORIZED", errc::e_unauthorized},
  };
  for (const auto& [text, code] : codes) {
    INFO(text);
    const std::string body = text + " something went wrong";
    const ServerError error = parse_server_error(body);
    CHECK(error.code == code);
    CHECK(error.code_text == text);
    CHECK(error.description == "something went wrong");
  }
}

TEST_CASE("only FIN, REQ and TOUCH failures are non-fatal", "[nsq][server-error]") {
  CHECK_FALSE(parse_server_error("E_FIN_FAILED FIN 0a1b2c3d4e5f6789 failed").fatal);
  CHECK_FALSE(parse_server_error("E_REQ_FAILED REQ 0a1b2c3d4e5f6789 failed").fatal);
  CHECK_FALSE(parse_server_error("E_TOUCH_FAILED TOUCH 0a1b2c3d4e5f6789 failed").fatal);
  for (const char* body : {"E_INVALID cannot SUB in current state", "E_BAD_TOPIC x",
                           "E_AUTH_FIRST AUTH required before SUB", "E_PUB_FAILED x",
                           "E_UNAUTHORIZED x", "E_IDENTIFY_FAILED x"}) {
    INFO(body);
    CHECK(parse_server_error(body).fatal);
  }
  CHECK_FALSE(is_fatal_server_error(errc::e_touch_failed));
  CHECK(is_fatal_server_error(errc::unknown_server_error));
}

TEST_CASE("an unknown or malformed error frame is an unknown, fatal server error",
          "[nsq][server-error][hostile]") {
  const ServerError unknown = parse_server_error("E_SOMETHING_NEW details here");
  CHECK(unknown.code == errc::unknown_server_error);
  CHECK(unknown.code_text == "E_SOMETHING_NEW");
  CHECK(unknown.description == "details here");
  CHECK(unknown.fatal);

  const ServerError empty = parse_server_error("");
  CHECK(empty.code == errc::unknown_server_error);
  CHECK(empty.code_text.empty());
  CHECK(empty.description.empty());
  CHECK(empty.fatal);

  // A known code is matched whole, not by prefix.
  CHECK(parse_server_error("E_INVALIDX x").code == errc::unknown_server_error);
  CHECK(parse_server_error("e_invalid x").code == errc::unknown_server_error);
}

TEST_CASE("an error frame without a description keeps the code", "[nsq][server-error]") {
  const ServerError error = parse_server_error("E_BAD_TOPIC");
  CHECK(error.code == errc::e_bad_topic);
  CHECK(error.code_text == "E_BAD_TOPIC");
  CHECK(error.description.empty());
  CHECK(make_error_code(error.code).message().find("E_BAD_TOPIC") != std::string::npos);
}

// =============================================================================================
// IDENTIFY

TEST_CASE("a default IDENTIFY asks only for feature negotiation", "[nsq][identify]") {
  CHECK(IdentifyRequest{}.to_json() == R"({"feature_negotiation":true})");
  IdentifyRequest plain;
  plain.feature_negotiation = false;
  CHECK(plain.to_json() == R"({"feature_negotiation":false})");
}

TEST_CASE("IDENTIFY emits every field that is set, in a fixed order", "[nsq][identify]") {
  IdentifyRequest request;
  request.client_id = "worker-1";
  request.hostname = "host.example";
  request.user_agent = "polybus/0.1";
  request.heartbeat_interval = 30000;
  request.output_buffer_size = 16384;
  request.output_buffer_timeout = 250;
  request.tls_v1 = true;
  request.snappy = true;
  request.deflate = true;
  request.deflate_level = 6;
  request.sample_rate = 10;
  request.msg_timeout = 60000;
  CHECK(request.to_json() ==
        R"({"client_id":"worker-1","hostname":"host.example","user_agent":"polybus/0.1",)"
        R"("feature_negotiation":true,"heartbeat_interval":30000,"output_buffer_size":16384,)"
        R"("output_buffer_timeout":250,"tls_v1":true,"snappy":true,"deflate":true,)"
        R"("deflate_level":6,"sample_rate":10,"msg_timeout":60000})");
}

TEST_CASE("IDENTIFY sends -1 to disable heartbeats and buffering", "[nsq][identify]") {
  IdentifyRequest request;
  request.heartbeat_interval = -1;
  request.output_buffer_size = -1;
  request.output_buffer_timeout = -1;
  request.sample_rate = 0;  // set, so sent even though zero
  CHECK(request.to_json() ==
        R"({"feature_negotiation":true,"heartbeat_interval":-1,"output_buffer_size":-1,)"
        R"("output_buffer_timeout":-1,"sample_rate":0})");
}

TEST_CASE("IDENTIFY escapes strings for JSON", "[nsq][identify]") {
  IdentifyRequest request;
  request.client_id = "quote\" backslash\\ newline\n tab\t ctl\x01 us\x1f nul"s + '\0' + " end";
  request.hostname = "caf\xc3\xa9";  // UTF-8 passes through unchanged
  request.user_agent = "</script>";  // no escape needed in JSON
  CHECK(request.to_json() ==
        R"({"client_id":"quote\" backslash\\ newline\n tab\t ctl\u0001 us\u001F nul\u0000 end",)"
        "\"hostname\":\"caf\xc3\xa9\",\"user_agent\":\"</script>\",\"feature_negotiation\":true}");
}

TEST_CASE("a plain OK to IDENTIFY gives nsqd's defaults", "[nsq][identify]") {
  IdentifyResponse response;
  response.max_rdy_count = 1;
  response.version = "stale";
  REQUIRE_FALSE(parse_identify_response("OK", response));
  CHECK_FALSE(response.negotiated);
  CHECK(response.max_rdy_count == 2500);
  CHECK(response.version.empty());
  CHECK(response.msg_timeout == 60000);
  CHECK(response.max_msg_timeout == 900000);
  CHECK_FALSE(response.tls_v1);
  CHECK_FALSE(response.auth_required);
}

TEST_CASE("nsqd 1.3's IDENTIFY response is read field by field", "[nsq][identify]") {
  const std::string body =
      R"({"max_rdy_count":1000,"version":"1.3.0","max_msg_timeout":600000,"msg_timeout":30000,)"
      R"("tls_v1":true,"deflate":false,"deflate_level":0,"max_deflate_level":9,"snappy":true,)"
      R"("sample_rate":25,"auth_required":true,"output_buffer_size":8192,)"
      R"("output_buffer_timeout":100,"topology_region":"eu","topology_zone":"eu-1a"})";
  IdentifyResponse response;
  REQUIRE_FALSE(parse_identify_response(body, response));
  CHECK(response.negotiated);
  CHECK(response.max_rdy_count == 1000);
  CHECK(response.version == "1.3.0");
  CHECK(response.max_msg_timeout == 600000);
  CHECK(response.msg_timeout == 30000);
  CHECK(response.tls_v1);
  CHECK_FALSE(response.deflate);
  CHECK(response.deflate_level == 0);
  CHECK(response.max_deflate_level == 9);
  CHECK(response.snappy);
  CHECK(response.sample_rate == 25);
  CHECK(response.auth_required);
  CHECK(response.output_buffer_size == 8192);
  CHECK(response.output_buffer_timeout == 100);
  CHECK(response.topology_region == "eu");
  CHECK(response.topology_zone == "eu-1a");
}

TEST_CASE("IDENTIFY response ignores unknown fields and keeps defaults for missing ones",
          "[nsq][identify]") {
  IdentifyResponse response;
  REQUIRE_FALSE(parse_identify_response(
      R"({"version":"9.9.9","future_field":{"nested":[1,2,3]},"another":null})", response));
  CHECK(response.negotiated);
  CHECK(response.version == "9.9.9");
  CHECK(response.max_rdy_count == 2500);
}

TEST_CASE("malformed JSON is invalid_json and leaves the output untouched",
          "[nsq][identify][hostile]") {
  const std::string deep_unbalanced(100000, '[');
  for (const std::string& body :
       {""s, "ok"s, "{"s, R"({"max_rdy_count":})"s, R"({"a":1} trailing)"s, R"({"a":1}{})"s,
        R"({'a':1})"s, R"({"a":"unterminated)"s, "{\"a\":\"ctl\x01\"}"s, "{\"a\":\"nul\0\"}"s,
        "{\"a\":\"bad utf8 \xff\"}"s, R"({"a":01})"s, R"({"a":NaN})"s, deep_unbalanced}) {
    INFO(body.substr(0, 40));
    IdentifyResponse response;
    response.version = "untouched";
    CHECK(parse_identify_response(body, response) == errc::invalid_json);
    CHECK(response.version == "untouched");
  }
}

TEST_CASE("IDENTIFY response fields of the wrong type or range are refused",
          "[nsq][identify][hostile]") {
  const std::string deep_balanced = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body :
       {R"([])"s, R"("OK")"s, R"(2500)"s, R"(null)"s, R"({"max_rdy_count":"2500"})"s,
        R"({"max_rdy_count":2500.5})"s, R"({"max_rdy_count":1e3})"s, R"({"max_rdy_count":-1})"s,
        R"({"max_rdy_count":18446744073709551615})"s, R"({"msg_timeout":-5})"s,
        R"({"max_msg_timeout":-1})"s, R"({"tls_v1":1})"s, R"({"snappy":"true"})"s,
        R"({"auth_required":null})"s, R"({"version":130})"s, R"({"deflate_level":4294967296})"s,
        R"({"sample_rate":[]})"s, R"({"topology_zone":{}})"s}) {
    INFO(body.substr(0, 60));
    IdentifyResponse response;
    response.version = "untouched";
    CHECK(parse_identify_response(body, response) == errc::invalid_identify_response);
    CHECK(response.version == "untouched");
  }
  // Nested past the JSON depth bound: refused before it is parsed.
  IdentifyResponse response;
  CHECK(parse_identify_response(deep_balanced, response) == errc::invalid_json);
}

// =============================================================================================
// AUTH

TEST_CASE("an AUTH response gives identity, URL and permission count", "[nsq][auth]") {
  AuthResponse response;
  REQUIRE_FALSE(parse_auth_response(
      R"({"identity":"svc-orders","identity_url":"https://auth.example/u/1","permission_count":3})",
      response));
  CHECK(response.identity == "svc-orders");
  CHECK(response.identity_url == "https://auth.example/u/1");
  CHECK(response.permission_count == 3);
}

TEST_CASE("malformed AUTH responses are refused", "[nsq][auth][hostile]") {
  AuthResponse response;
  response.identity = "untouched";
  CHECK(parse_auth_response("OK", response) == errc::invalid_json);
  CHECK(parse_auth_response("{", response) == errc::invalid_json);
  CHECK(parse_auth_response("[]", response) == errc::invalid_auth_response);
  CHECK(parse_auth_response(R"({"identity":7})", response) == errc::invalid_auth_response);
  CHECK(parse_auth_response(R"({"permission_count":"3"})", response) ==
        errc::invalid_auth_response);
  CHECK(parse_auth_response(R"({"permission_count":-1})", response) == errc::invalid_auth_response);
  CHECK(response.identity == "untouched");
}

// =============================================================================================
// nsqlookupd

namespace {

constexpr std::string_view kLookupProducers =
    R"([{"remote_address":"10.0.0.5:52011","hostname":"nsqd-a","broadcast_address":"nsqd-a.internal",)"
    R"("tcp_port":4150,"http_port":4151,"version":"1.3.0","topology_zone":"","topology_region":""},)"
    R"({"remote_address":"10.0.0.6:40000","hostname":"nsqd-b","broadcast_address":"10.0.0.6",)"
    R"("tcp_port":65535,"http_port":0,"version":"1.2.1"}])";

void check_sample_producers(const std::vector<LookupProducer>& producers) {
  REQUIRE(producers.size() == 2);
  CHECK(producers[0].broadcast_address == "nsqd-a.internal");
  CHECK(producers[0].hostname == "nsqd-a");
  CHECK(producers[0].remote_address == "10.0.0.5:52011");
  CHECK(producers[0].version == "1.3.0");
  CHECK(producers[0].tcp_port == 4150);
  CHECK(producers[0].http_port == 4151);
  CHECK(producers[1].broadcast_address == "10.0.0.6");
  CHECK(producers[1].tcp_port == 65535);
  CHECK(producers[1].http_port == 0);
}

std::string lookup_with_producer(std::string_view producer) {
  return R"({"channels":[],"producers":[)" + std::string(producer) + "]}";
}

}  // namespace

TEST_CASE("nsqlookupd 1.x's unwrapped lookup response lists the producers", "[nsq][lookup]") {
  const std::string body =
      R"({"channels":["archive","metrics"],"producers":)" + std::string(kLookupProducers) + "}";
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(body, producers));
  check_sample_producers(producers);
}

TEST_CASE("the old wrapped lookup response is accepted too", "[nsq][lookup]") {
  const std::string body = R"({"status_code":200,"status_txt":"OK","data":{"channels":["a"],)"
                           R"("producers":)" +
                           std::string(kLookupProducers) + "}}";
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(body, producers));
  check_sample_producers(producers);
}

TEST_CASE("a lookup with no producers yet gives an empty list", "[nsq][lookup]") {
  std::vector<LookupProducer> producers(3);
  REQUIRE_FALSE(parse_lookup_response(R"({"channels":[],"producers":[]})", producers));
  CHECK(producers.empty());
}

TEST_CASE("an unknown topic is reported as such in both forms", "[nsq][lookup]") {
  std::vector<LookupProducer> producers;
  CHECK(parse_lookup_response(R"({"message":"TOPIC_NOT_FOUND"})", producers) ==
        errc::lookup_topic_not_found);
  CHECK(parse_lookup_response(R"({"status_code":404,"status_txt":"TOPIC_NOT_FOUND","data":null})",
                              producers) == errc::lookup_topic_not_found);
  CHECK(parse_lookup_response(R"({"status_code":500,"status_txt":"INTERNAL_ERROR","data":null})",
                              producers) == errc::lookup_failed);
}

TEST_CASE("malformed lookup responses are refused and leave the list untouched",
          "[nsq][lookup][hostile]") {
  const std::vector<std::pair<std::string, errc>> cases = {
      {"", errc::invalid_json},
      {"<html>502 Bad Gateway</html>", errc::invalid_json},
      {R"({"producers":[)", errc::invalid_json},
      {"[]", errc::invalid_lookup_response},
      {R"({"channels":[]})", errc::invalid_lookup_response},
      {R"({"producers":{}})", errc::invalid_lookup_response},
      {R"({"producers":null})", errc::invalid_lookup_response},
      {R"({"status_code":200,"status_txt":"OK"})", errc::invalid_lookup_response},
      {R"({"status_code":200,"status_txt":"OK","data":[]})", errc::invalid_lookup_response},
      {R"({"status_code":"200","data":{"producers":[]}})", errc::invalid_lookup_response},
      {R"({"status_code":200,"data":{"channels":[]}})", errc::invalid_lookup_response},
      {R"({"message":"SOMETHING_ELSE"})", errc::invalid_lookup_response},
      {lookup_with_producer("7"), errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":0})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":65536})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":-1})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":"4150"})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":4150.0})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h"})"), errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":4150,"http_port":70000})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":4150,"http_port":-4151})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"tcp_port":4150})"), errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"","tcp_port":4150})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":1,"tcp_port":4150})"),
       errc::invalid_lookup_response},
      {lookup_with_producer(R"({"broadcast_address":"h","tcp_port":4150,"version":1.3})"),
       errc::invalid_lookup_response},
  };
  for (const auto& [body, expected] : cases) {
    INFO(body);
    std::vector<LookupProducer> producers(1);
    producers[0].hostname = "untouched";
    CHECK(parse_lookup_response(body, producers) == expected);
    REQUIRE(producers.size() == 1);
    CHECK(producers[0].hostname == "untouched");
  }
}

TEST_CASE("a producer needs only a broadcast address and a TCP port", "[nsq][lookup]") {
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(
      lookup_with_producer(R"({"broadcast_address":"h","tcp_port":1,"extra":[{}]})"), producers));
  REQUIRE(producers.size() == 1);
  CHECK(producers[0].broadcast_address == "h");
  CHECK(producers[0].tcp_port == 1);
  CHECK(producers[0].http_port == 0);
  CHECK(producers[0].hostname.empty());
}

TEST_CASE("JSON strings decoding to a lone surrogate are refused", "[nsq][codec]") {
  // Found by the nsq_json fuzzer: RapidJSON 1.1.0 decodes \udfff into bytes that are not UTF-8.
  IdentifyResponse response;
  CHECK(parse_identify_response(R"({"version":"1.3.0\udfff"})", response));
  CHECK_FALSE(parse_identify_response(R"({"version":"1.3.0 \ud83d\ude00"})", response));
  CHECK(response.version == "1.3.0 \xf0\x9f\x98\x80");
}

TEST_CASE("JSON from nsqd or nsqlookupd nested deeper than 64 is refused", "[nsq][codec]") {
  IdentifyResponse response;
  std::string deep =
      "{\"version\":\"1\",\"x\":" + std::string(64, '[') + std::string(64, ']') + "}";
  CHECK(parse_identify_response(deep, response));
  std::string ok =
      "{\"version\":\"1\",\"x\":" + std::string(10, '[') + "\"]]\"" + std::string(10, ']') + "}";
  CHECK_FALSE(parse_identify_response(ok, response));
}
