// SPDX-License-Identifier: Apache-2.0
// The SP codec under memo01 (polybus/memodb/sp.hpp): NNG's connection header, TCP and IPC
// framing fed whole and a byte at a time, the size bound checked before allocating, and req0's
// request IDs and rep0's backtraces, with hostile input refused by name.
#include <catch2/catch.hpp>
#include <random>

#include "polybus/error.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb/sp.hpp"

using namespace polybus::memodb;

namespace {

// Feeds `bytes` in pieces of `piece` bytes; returns the messages decoded, or the first error.
std::vector<std::string> decode_all(sp::FrameDecoder& decoder, std::string_view bytes,
                                    std::size_t piece, std::error_code& ec,
                                    std::string* why = nullptr) {
  std::vector<std::string> out;
  while (!bytes.empty()) {
    auto chunk = bytes.substr(0, piece);
    while (!chunk.empty()) {
      const std::size_t used = decoder.feed(chunk, ec, why);
      if (ec) return out;
      chunk.remove_prefix(used);
      bytes.remove_prefix(used);
      if (decoder.ready())
        out.push_back(decoder.take());
      else if (used == 0)
        FAIL("the decoder took nothing and has no message");
    }
  }
  return out;
}

}  // namespace

TEST_CASE("sp: the connection header is NNG's, and only the expected peer is accepted") {
  CHECK(sp::connection_header(sp::Protocol::req0) == std::string("\0SP\0\0\x30\0\0", 8));
  CHECK(sp::connection_header(sp::Protocol::rep0) == std::string("\0SP\0\0\x31\0\0", 8));
  CHECK_FALSE(
      sp::check_connection_header(sp::connection_header(sp::Protocol::req0), sp::Protocol::req0));
  std::string why;
  CHECK(sp::check_connection_header(sp::connection_header(sp::Protocol::rep0), sp::Protocol::req0,
                                    &why) == make_error_code(errc::sp_bad_header));
  CHECK_THAT(why, Catch::Contains("rep0") && Catch::Contains("not req0"));
  CHECK(sp::check_connection_header(std::string("\0SP\0\x00\x70\0\0", 8), sp::Protocol::rep0,
                                    &why) == make_error_code(errc::sp_bad_header));
  CHECK_THAT(why, Catch::Contains("0x0070"));
  CHECK(sp::check_connection_header("GET / HT", sp::Protocol::rep0, &why));
  CHECK_THAT(why, Catch::Contains("not an SP header"));
  CHECK(sp::check_connection_header(std::string("\0SP\0\0\x31\0\x01", 8), sp::Protocol::rep0));
  CHECK(sp::check_connection_header(std::string("\0SP", 3), sp::Protocol::rep0, &why));
  CHECK_THAT(why, Catch::Contains("3 bytes"));
}

TEST_CASE("sp: TCP and IPC messages come out whole however the stream is cut") {
  const auto carrier = GENERATE(sp::Carrier::tcp, sp::Carrier::ipc);
  const std::vector<std::string> messages = {"", "a", std::string(70000, 'x'),
                                             std::string("\0\x80\xff", 3)};
  std::string stream;
  for (const auto& m : messages) stream += sp::frame_prefix(carrier, m.size()) + m;
  CHECK(sp::frame_prefix(carrier, 0).size() == (carrier == sp::Carrier::ipc ? 9u : 8u));
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, stream.size()}) {
    CAPTURE(piece);
    sp::FrameDecoder decoder(carrier, 1 << 20);
    std::error_code ec;
    CHECK(decode_all(decoder, stream, piece, ec) == messages);
    CHECK_FALSE(ec);
    CHECK_FALSE(decoder.mid_message());
  }
}

TEST_CASE("sp: a message is held until taken, and mid_message tells a cut one") {
  sp::FrameDecoder decoder(sp::Carrier::tcp, 100);
  const std::string two =
      sp::frame_prefix(sp::Carrier::tcp, 2) + "ab" + sp::frame_prefix(sp::Carrier::tcp, 1) + "c";
  std::error_code ec;
  CHECK(decoder.feed(two, ec) == 10);  // the first message only
  REQUIRE(decoder.ready());
  CHECK(decoder.feed(std::string_view(two).substr(10), ec) == 0);  // nothing while one waits
  CHECK(decoder.take() == "ab");
  CHECK(decoder.feed(std::string_view(two).substr(10, 3), ec) == 3);
  CHECK(decoder.mid_message());
  CHECK(decoder.feed(std::string_view(two).substr(13), ec) == 6);
  CHECK(decoder.take() == "c");
  CHECK_FALSE(decoder.mid_message());
}

TEST_CASE("sp: a length over the limit is refused before anything is allocated for it") {
  const auto carrier = GENERATE(sp::Carrier::tcp, sp::Carrier::ipc);
  for (std::uint64_t length : {std::uint64_t{101}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    sp::FrameDecoder decoder(carrier, 100);
    std::error_code ec;
    std::string why;
    decode_all(decoder, sp::frame_prefix(carrier, length), 1, ec, &why);
    CHECK(ec == make_error_code(errc::sp_message_too_large));
    CHECK(ec == polybus::errc::frame_too_large);
    CHECK_THAT(why, Catch::Contains(std::to_string(length)) && Catch::Contains("100"));
    // Failed for good: the connection is to be closed.
    decoder.feed("x", ec);
    CHECK(ec);
  }
  sp::FrameDecoder exact(sp::Carrier::tcp, 3);
  std::error_code ec;
  CHECK(decode_all(exact, sp::frame_prefix(sp::Carrier::tcp, 3) + "abc", 1, ec) ==
        std::vector<std::string>{"abc"});
}

TEST_CASE("sp: an IPC message whose type byte is not 1 is refused") {
  sp::FrameDecoder decoder(sp::Carrier::ipc, 100);
  std::error_code ec;
  std::string why;
  decoder.feed(std::string("\x02\0\0\0\0\0\0\0\x01z", 10), ec, &why);
  CHECK(ec == make_error_code(errc::sp_bad_frame));
  CHECK_THAT(why, Catch::Contains("type 2"));
}

TEST_CASE("sp: req0 request IDs have the top bit, and a reply gives its ID back") {
  CHECK(sp::request_id(1) == 0x80000001u);
  CHECK(sp::encode_request_id(0x80000102u) == std::string("\x80\x00\x01\x02", 4));
  std::string_view rest;  // a view into the reply: the reply must outlive it
  const std::string reply("\x80\x00\x01\x02payload", 11);
  CHECK(sp::split_reply(reply, rest) == 0x80000102u);
  CHECK(rest == "payload");
  CHECK_FALSE(sp::split_reply(std::string("\x00\x00\x01\x02", 4), rest));  // no top bit
  CHECK_FALSE(sp::split_reply("\x80\x01", rest));                          // too short
}

TEST_CASE("sp: rep0 backtraces end at the first word with the top bit, at most 8 hops") {
  std::string_view backtrace, body;
  bool too_many = false;
  const std::string direct = std::string("\x80\0\0\x07", 4) + "job";
  CHECK_FALSE(sp::split_request(direct, backtrace, body, too_many));
  CHECK(backtrace == direct.substr(0, 4));
  CHECK(body == "job");
  CHECK_FALSE(too_many);
  const std::string via_device = std::string("\0\0\0\x02\x80\0\0\x07", 8) + "job";
  CHECK_FALSE(sp::split_request(via_device, backtrace, body, too_many));
  CHECK(backtrace.size() == 8);
  CHECK(body == "job");
  // Nine hops: dropped silently (no error), as rep0 does.
  std::string nine;
  for (int i = 0; i < 8; ++i) nine += std::string("\0\0\0\x01", 4);
  nine += std::string("\x80\0\0\x01", 4);
  CHECK_FALSE(sp::split_request(nine, backtrace, body, too_many));
  CHECK(too_many);
  // No word with the top bit before the end: the peer is closed on.
  CHECK(sp::split_request(std::string("\0\0\0\x01\0\0", 6), backtrace, body, too_many) ==
        make_error_code(errc::sp_no_backtrace));
  CHECK(sp::split_request("", backtrace, body, too_many) == make_error_code(errc::sp_no_backtrace));
}
