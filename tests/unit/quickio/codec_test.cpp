// SPDX-License-Identifier: Apache-2.0
// The QuickIO codec: events, paths, JSON, callback bodies, raw framing and HTTP bodies,
// including malformed and hostile input.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"
#include "ws_frames.hpp"

using namespace polybus::quickio;
using polybus::text::is_valid_utf8;
using polybus::text::json_quote;

namespace {

std::error_code parse(std::string_view text, std::string* why = nullptr) {
  Event event;
  return parse_event(text, event, why);
}

std::vector<std::string> frames_of(RawFrameDecoder& decoder, std::string_view bytes,
                                   std::error_code* error = nullptr) {
  std::vector<std::string> frames;
  auto ec = decoder.feed(bytes, [&](std::string_view frame) { frames.emplace_back(frame); });
  if (error) *error = ec;
  return frames;
}

}  // namespace

TEST_CASE("parse_event splits path, callback id and json", "[quickio][codec]") {
  Event event;
  REQUIRE_FALSE(parse_event("/some/path:123={\"a\":[1,2]}", event));
  CHECK(event.path == "/some/path");
  CHECK(event.callback_id == 123);
  CHECK(event.json == "{\"a\":[1,2]}");

  REQUIRE_FALSE(parse_event("/qio/ohai:0=null", event));
  CHECK(event.callback_id == 0);
  REQUIRE_FALSE(parse_event("/a-b_c/D9:18446744073709551615=\"x=y:z\"", event));
  CHECK(event.callback_id == 18446744073709551615ull);
  CHECK(event.json == "\"x=y:z\"");
}

TEST_CASE("parse_event rejects a missing ':' or '=' as malformed_event", "[quickio][codec]") {
  std::string why;
  CHECK(parse("/path", &why) == codec_errc::malformed_event);
  CHECK(why.find("':'") != std::string::npos);
  CHECK(parse("/path=null", &why) == codec_errc::malformed_event);
  CHECK(parse("/path:12null", &why) == codec_errc::malformed_event);
  CHECK(why.find("'='") != std::string::npos);
  CHECK(parse("") == codec_errc::malformed_event);
}

TEST_CASE("parse_event rejects empty paths and paths with bad characters", "[quickio][codec]") {
  std::string why;
  CHECK(parse(":1=null", &why) == codec_errc::invalid_path);
  CHECK(why.find("empty") != std::string::npos);
  CHECK(parse("path:1=null", &why) == codec_errc::invalid_path);
  CHECK(why.find("'/'") != std::string::npos);
  CHECK(parse("/pa th:1=null", &why) == codec_errc::invalid_path);
  CHECK(why.find("character") != std::string::npos);
  CHECK(parse("/pa.th:1=null") == codec_errc::invalid_path);
  CHECK(parse(std::string("/pa\0th:1=null", 13)) == codec_errc::invalid_path);
  CHECK(parse("/p\xc3\xa9:1=null") == codec_errc::invalid_path);
}

TEST_CASE("parse_event rejects overflowing, negative, empty and non-decimal callback ids",
          "[quickio][codec]") {
  std::string why;
  CHECK(parse("/p:99999999999999999999=null", &why) == codec_errc::invalid_callback_id);
  CHECK(why.find("99999999999999999999") != std::string::npos);
  CHECK(parse("/p:18446744073709551616=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p:-1=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p:+1=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p:=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p: 1=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p:0x10=null") == codec_errc::invalid_callback_id);
  CHECK(parse("/p:000000000000000000001=null") == codec_errc::invalid_callback_id);
}

TEST_CASE("parse_event rejects data that is not exactly one JSON value", "[quickio][codec]") {
  std::string why;
  CHECK(parse("/p:1=", &why) == codec_errc::invalid_json);
  CHECK(why.find("JSON") != std::string::npos);
  CHECK(parse("/p:1={") == codec_errc::invalid_json);
  CHECK(parse("/p:1=nul") == codec_errc::invalid_json);
  CHECK(parse("/p:1=null null") == codec_errc::invalid_json);
  CHECK(parse("/p:1={\"a\":1}x") == codec_errc::invalid_json);
  CHECK(parse(std::string("/p:1=null\0junk", 14)) == codec_errc::invalid_json);
  CHECK(parse("/p:1=\"\xff\"") == codec_errc::invalid_json);
  CHECK_FALSE(parse("/p:1= [1, 2] "));
}

TEST_CASE("deeply nested JSON is judged without exhausting the stack", "[quickio][codec]") {
  std::string deep(200000, '[');
  CHECK_FALSE(is_valid_json(deep));
  deep += std::string(200000, ']');
  CHECK(is_valid_json(deep, 200000));  // well-formed: judged iteratively, however deep
  CHECK_FALSE(is_valid_json(deep));    // but deeper than the default budget: refused
  CHECK(is_valid_json("[[[[1]]]]", 4));
  CHECK_FALSE(is_valid_json("[[[[1]]]]", 3));
}

TEST_CASE("append_event writes the text parse_event reads", "[quickio][codec]") {
  std::string out;
  append_event(out, "/x/y", 42, "[true]");
  CHECK(out == "/x/y:42=[true]");
  CHECK(make_event("/qio/heartbeat", 0, "null") == "/qio/heartbeat:0=null");
  Event event;
  REQUIRE_FALSE(parse_event(out, event));
  CHECK(event.callback_id == 42);
}

TEST_CASE("clean_path keeps allowed characters, one leading slash, no repeats or trailing slash",
          "[quickio][codec]") {
  CHECK(clean_path("/a/b") == "/a/b");
  CHECK(clean_path("a/b") == "/a/b");
  CHECK(clean_path("//a///b//") == "/a/b");
  CHECK(clean_path("/a b/c.d!") == "/ab/cd");
  CHECK(clean_path("/A-z_0/9") == "/A-z_0/9");
  CHECK(clean_path("") == "/");
  CHECK(clean_path("/") == "/");
  CHECK(clean_path("/ /") == "/");
  CHECK(is_clean_path("/a/b"));
  CHECK(is_clean_path("/"));
  CHECK_FALSE(is_clean_path(""));
  CHECK_FALSE(is_clean_path("a/b"));
  CHECK_FALSE(is_clean_path("/a//b"));
  CHECK_FALSE(is_clean_path("/a/"));
  CHECK_FALSE(is_clean_path("/a b"));
  CHECK(is_valid_path("/a"));
  CHECK_FALSE(is_valid_path(""));
  CHECK_FALSE(is_valid_path("a"));
  CHECK_FALSE(is_valid_path("/a:b"));
}

TEST_CASE("json_quote escapes and json_unquote reads strings back", "[quickio][codec]") {
  std::string text = "a\"b\\c\nd\x01\xc3\xa9";
  std::string quoted = json_quote(text);
  CHECK(quoted == "\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\"");
  CHECK(is_valid_json(quoted));
  std::string back;
  REQUIRE(json_unquote(quoted, back));
  CHECK(back == text);
  CHECK(json_unquote("\"\\u00e9\"", back));
  CHECK(back == "\xc3\xa9");
  CHECK_FALSE(json_unquote("null", back));
  CHECK_FALSE(json_unquote("[\"a\"]", back));
  CHECK_FALSE(json_unquote("\"a\" \"b\"", back));
  CHECK_FALSE(json_unquote("\"unterminated", back));
  // A BOM's byte before the value is not JSON (RapidJSON's UTF-8 stream skipped it).
  CHECK_FALSE(json_unquote("\xef\"e\"", back));
  CHECK_FALSE(json_unquote("\xef\xbb\xbf\"e\"", back));
}

TEST_CASE("callback_path_id reads /qio/callback/<id> and nothing else", "[quickio][codec]") {
  CHECK(callback_path_id("/qio/callback/7") == std::optional<std::uint64_t>(7));
  CHECK(callback_path(65537) == "/qio/callback/65537");
  CHECK(callback_path_id(callback_path(65537)) == std::optional<std::uint64_t>(65537));
  CHECK_FALSE(callback_path_id("/qio/callback/0"));
  CHECK_FALSE(callback_path_id("/qio/callback/"));
  CHECK_FALSE(callback_path_id("/qio/callback/1/2"));
  CHECK_FALSE(callback_path_id("/qio/callback/99999999999999999999"));
  CHECK_FALSE(callback_path_id("/qio/callbacks/1"));
  CHECK_FALSE(callback_path_id("/qio/on"));
}

TEST_CASE("callback bodies round trip with code, data and err_msg", "[quickio][codec]") {
  CHECK(make_callback_body(200, "null") == "{\"code\":200,\"data\":null}");
  CHECK(make_callback_body(404, "", "no \"subscriber\"") ==
        "{\"code\":404,\"data\":null,\"err_msg\":\"no \\\"subscriber\\\"\"}");
  CallbackBody body;
  REQUIRE_FALSE(parse_callback_body("{\"code\":200,\"data\":{\"k\":[1,\"v\"]}}", body));
  CHECK(body.code == 200);
  CHECK(body.data_json == "{\"k\":[1,\"v\"]}");
  CHECK(body.err_msg.empty());
  REQUIRE_FALSE(parse_callback_body(make_callback_body(500, "1", "callback expired"), body));
  CHECK(body.code == 500);
  CHECK(body.data_json == "1");
  CHECK(body.err_msg == "callback expired");
  REQUIRE_FALSE(parse_callback_body("{\"code\":202}", body));
  CHECK(body.data_json == "null");
  CHECK(body.err_msg.empty());
  // The real server's 404 to /qio/on of a path no application handles.
  REQUIRE_FALSE(parse_callback_body("{\"code\":404,\"data\":null,\"err_msg\":null}", body));
  CHECK(body.code == 404);
  CHECK(body.err_msg.empty());
}

TEST_CASE("malformed callback bodies are errors that say what is wrong", "[quickio][codec]") {
  CallbackBody body;
  std::string why;
  CHECK(parse_callback_body("[1]", body, &why) == codec_errc::malformed_callback_body);
  CHECK(why.find("object") != std::string::npos);
  CHECK(parse_callback_body("{\"data\":1}", body, &why) == codec_errc::malformed_callback_body);
  CHECK(why.find("code") != std::string::npos);
  CHECK(parse_callback_body("{\"code\":\"200\"}", body, &why) ==
        codec_errc::malformed_callback_body);
  CHECK(parse_callback_body("{\"code\":1.5}", body) == codec_errc::malformed_callback_body);
  CHECK(parse_callback_body("{\"code\":200,\"err_msg\":3}", body, &why) ==
        codec_errc::malformed_callback_body);
  CHECK(why.find("err_msg") != std::string::npos);
  CHECK(parse_callback_body("{\"code\":200", body) == codec_errc::malformed_callback_body);
}

TEST_CASE("codec errors belong to the quickio category", "[quickio][codec]") {
  std::error_code ec = codec_errc::frame_too_large;
  CHECK(std::string(ec.category().name()) == "quickio");
  CHECK(ec.message().find("maximum") != std::string::npos);
}

TEST_CASE("raw frames are an 8-byte big-endian length and the event", "[quickio][codec]") {
  std::string out;
  append_raw_frame(out, "/a:0=null");
  REQUIRE(out.size() == 8 + 9);
  CHECK(out.substr(0, 8) == std::string("\0\0\0\0\0\0\0\x09", 8));
  CHECK(out.substr(8) == "/a:0=null");
  std::string header;
  append_raw_frame_header(header, 0x0102030405ull);
  CHECK(header == std::string("\0\0\0\x01\x02\x03\x04\x05", 8));
}

TEST_CASE("a frame wholly inside one feed is a view of the caller's bytes", "[quickio][codec]") {
  std::string bytes;
  append_raw_frame(bytes, "/one:0=1");
  append_raw_frame(bytes, "/two:0=2");
  RawFrameDecoder decoder(1024);
  std::vector<std::string_view> views;
  REQUIRE_FALSE(decoder.feed(bytes, [&](std::string_view frame) { views.push_back(frame); }));
  REQUIRE(views.size() == 2);
  CHECK(views[0] == "/one:0=1");
  CHECK(views[1] == "/two:0=2");
  CHECK(views[0].data() == bytes.data() + 8);
  CHECK(views[1].data() == bytes.data() + 8 + 8 + 8);
}

TEST_CASE("frames split at every byte are reassembled", "[quickio][codec]") {
  std::string bytes;
  append_raw_frame(bytes, "/first:1=\"hello\"");
  append_raw_frame(bytes, "/second:0=[1,2,3]");
  for (std::size_t split = 0; split <= bytes.size(); ++split) {
    RawFrameDecoder decoder(1024);
    auto frames = frames_of(decoder, std::string_view(bytes).substr(0, split));
    auto rest = frames_of(decoder, std::string_view(bytes).substr(split));
    frames.insert(frames.end(), rest.begin(), rest.end());
    INFO("split at " << split);
    REQUIRE(frames == std::vector<std::string>{"/first:1=\"hello\"", "/second:0=[1,2,3]"});
  }
  RawFrameDecoder decoder(1024);
  std::vector<std::string> frames;
  for (char c : bytes) {
    auto got = frames_of(decoder, std::string_view(&c, 1));
    frames.insert(frames.end(), got.begin(), got.end());
  }
  CHECK(frames == std::vector<std::string>{"/first:1=\"hello\"", "/second:0=[1,2,3]"});
}

TEST_CASE("a truncated frame yields nothing until the rest arrives", "[quickio][codec]") {
  std::string bytes;
  append_raw_frame(bytes, "/p:0=null");
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    RawFrameDecoder decoder(1024);
    std::error_code ec;
    CHECK(frames_of(decoder, std::string_view(bytes).substr(0, cut), &ec).empty());
    CHECK_FALSE(ec);
  }
}

TEST_CASE("a 2^63 length is frame_too_large before any allocation", "[quickio][codec]") {
  RawFrameDecoder decoder(1 << 20);
  std::string bytes("\x80\0\0\0\0\0\0\0", 8);
  bytes += "junk";
  std::error_code ec;
  CHECK(frames_of(decoder, bytes, &ec).empty());
  CHECK(ec == codec_errc::frame_too_large);
  std::string_view frame;
  CHECK(decoder.parse("more", frame).error == codec_errc::frame_too_large);  // sticky
  decoder.reset();
  std::string good;
  append_raw_frame(good, "/p:0=1");
  CHECK(frames_of(decoder, good) == std::vector<std::string>{"/p:0=1"});
}

TEST_CASE("a length just over the bound is refused and one at the bound accepted",
          "[quickio][codec]") {
  RawFrameDecoder decoder(16);
  std::string at_bound;
  append_raw_frame(at_bound, std::string(16, 'x'));
  CHECK(frames_of(decoder, at_bound).size() == 1);
  std::string over;
  append_raw_frame(over, std::string(17, 'x'));
  std::error_code ec;
  CHECK(frames_of(decoder, over, &ec).empty());
  CHECK(ec == codec_errc::frame_too_large);
}

TEST_CASE("an empty raw frame is malformed", "[quickio][codec]") {
  RawFrameDecoder decoder(16);
  std::error_code ec;
  frames_of(decoder, std::string(8, '\0'), &ec);
  CHECK(ec == codec_errc::malformed_frame);
}

TEST_CASE("the parse loop reports consumed counts and frames spanning feeds", "[quickio][codec]") {
  std::string bytes;
  append_raw_frame(bytes, "/big:0=\"" + std::string(1000, 'z') + "\"");
  RawFrameDecoder decoder(4096);
  std::string_view frame;
  auto r = decoder.parse(std::string_view(bytes).substr(0, 5), frame);
  CHECK(r.consumed == 5);
  CHECK_FALSE(r.has_frame);
  r = decoder.parse(std::string_view(bytes).substr(5, 500), frame);
  CHECK(r.consumed == 500);
  CHECK_FALSE(r.has_frame);
  std::string tail = bytes.substr(505) + "extra";
  r = decoder.parse(tail, frame);
  CHECK(r.consumed == bytes.size() - 505);
  REQUIRE(r.has_frame);
  CHECK(frame == std::string_view(bytes).substr(8));
}

TEST_CASE("for_each_line splits on newlines and ignores one trailing empty line",
          "[quickio][codec]") {
  auto lines = [](std::string_view body) {
    std::vector<std::string> out;
    for_each_line(body, [&](std::string_view line) { out.emplace_back(line); });
    return out;
  };
  CHECK(lines("").empty());
  CHECK(lines("\n") == std::vector<std::string>{""});
  CHECK(lines("/a:0=1") == std::vector<std::string>{"/a:0=1"});
  CHECK(lines("/a:0=1\n/b:0=2\n") == std::vector<std::string>{"/a:0=1", "/b:0=2"});
  CHECK(lines("/a:0=1\n\n/b:0=2") == std::vector<std::string>{"/a:0=1", "", "/b:0=2"});
}

TEST_CASE("a callback body's data arrives exactly as the server wrote it", "[quickio][codec]") {
  // Found by the quickio_json fuzzer: a DOM round trip rewrote numbers and turned 1.8e308 into
  // an infinity it then could not write, truncating the data.
  auto data_of = [](std::string_view json) {
    CallbackBody body;
    REQUIRE_FALSE(parse_callback_body(json, body));
    return body.data_json;
  };
  CHECK(data_of(R"({"code":200,"data":0.30000000000000004})") == "0.30000000000000004");
  CHECK(data_of(R"({"code":200,"data":[1,1.7976931348623159e308]})") ==
        "[1,1.7976931348623159e308]");
  CHECK(data_of(R"({"data" : {"a":"x\"}y","b":[{}]} ,"code":200})") == R"({"a":"x\"}y","b":[{}]})");
  CHECK(data_of(R"({"d\u0061ta":"escaped key","code":200})") == R"("escaped key")");
  CHECK(data_of(R"({"code":200,"err_msg":"data","dat":1})") == "null");
  CHECK(data_of(R"({"code":200,"data":1e5 })") == "1e5");
  CHECK(data_of(R"({"code":200,"data":"first","data":"second"})") == R"("first")");
}

TEST_CASE("a JSON string decoding to a lone surrogate is not a string", "[quickio][codec]") {
  std::string out;
  CHECK_FALSE(json_unquote(R"("\udfff")", out));
  CHECK(json_unquote(R"("\ud83d\ude00")", out));
  CHECK(out == "\xf0\x9f\x98\x80");
}

namespace {

// RFC 6455 section 5.2, read byte by byte: what a server makes of a client's frame.
struct ReadFrame {
  bool fin = false;
  int opcode = -1;
  bool masked = false;
  std::size_t header = 0;
  std::string payload;
};
ReadFrame read_client_frame(const std::string& bytes) {
  ReadFrame f;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes.at(i)); };
  f.fin = byte(0) & 0x80;
  f.opcode = byte(0) & 0x0F;
  f.masked = byte(1) & 0x80;
  std::uint64_t length = byte(1) & 0x7F;
  std::size_t at = 2;
  if (length == 126) {
    length = (std::uint64_t{byte(2)} << 8) | byte(3);
    at = 4;
  } else if (length == 127) {
    length = 0;
    for (std::size_t i = 0; i < 8; ++i) length = (length << 8) | byte(2 + i);
    at = 10;
  }
  const std::size_t key = at;
  at += 4;
  f.header = at;
  REQUIRE(bytes.size() == at + length);
  for (std::size_t i = 0; i < length; ++i)
    f.payload.push_back(static_cast<char>(byte(at + i) ^ byte(key + i % 4)));
  return f;
}

}  // namespace

TEST_CASE("a WebSocket text frame is masked, final, and uses the shortest length form",
          "[quickio][codec]") {
  // Lengths at each form's edges, and ones that leave 1-7 bytes after the last whole word.
  for (std::size_t n : {0, 1, 7, 8, 9, 15, 125, 126, 127, 200, 65535, 65536, 70001}) {
    std::string payload;
    for (std::size_t i = 0; i < n; ++i) payload.push_back(static_cast<char>('a' + i % 26));
    std::string out = "x";  // appended, not overwritten
    append_masked_text_frame(out, payload, 0xA1B2C3D4u);
    REQUIRE(out.front() == 'x');
    const ReadFrame f = read_client_frame(out.substr(1));
    CHECK(f.fin);
    CHECK(f.opcode == 1);
    CHECK(f.masked);
    CHECK(f.header == (n < 126 ? 6u : n <= 65535 ? 8u : 14u));
    CHECK(f.payload == payload);
    if (n >= 8) CHECK(out.substr(1 + f.header, 8) != payload.substr(0, 8));  // really masked
  }
}

TEST_CASE("a WebSocket frame's mask is the key's four bytes in memory order", "[quickio][codec]") {
  std::uint32_t key = 0;
  const unsigned char bytes[4] = {1, 2, 3, 4};
  std::memcpy(&key, bytes, 4);
  std::string out;
  append_masked_text_frame(out, std::string(4, '\0'), key);
  REQUIRE(out.size() == 2 + 4 + 4);
  CHECK(out.substr(2, 4) == std::string("\x01\x02\x03\x04", 4));
  CHECK(out.substr(6, 4) == std::string("\x01\x02\x03\x04", 4));  // zeros masked show the key
}

TEST_CASE("a WebSocket frame's header is read whole or not at all, in any length form",
          "[quickio][codec]") {
  const unsigned char key[4] = {9, 8, 7, 6};
  struct Case {
    std::string frame;
    bool fin;
    unsigned rsv;
    int opcode;
    bool masked;
    std::size_t header;
    std::uint64_t length;
    bool plain_text;
  };
  const std::string big(70000, 'b');
  for (const Case& c : {
           Case{polybus::test::ws_frame(0x81, "/a:0=1"), true, 0, 1, false, 2, 6, true},
           Case{polybus::test::ws_frame(0x81, "/a:0=1", 1), true, 0, 1, false, 4, 6, true},
           Case{polybus::test::ws_frame(0x81, "/a:0=1", 2), true, 0, 1, false, 10, 6, true},
           Case{polybus::test::ws_frame(0x81, big), true, 0, 1, false, 10, 70000, true},
           Case{polybus::test::ws_frame(0x01, "/a"), false, 0, 1, false, 2, 2, false},
           Case{polybus::test::ws_frame(0xC1, "x"), true, 4, 1, false, 2, 1, false},
           Case{polybus::test::ws_frame(0x82, "x"), true, 0, 2, false, 2, 1, false},
           Case{polybus::test::ws_frame(0x89, ""), true, 0, 9, false, 2, 0, false},
           Case{polybus::test::ws_frame(0x81, "x", 0, key), true, 0, 1, true, 6, 1, false},
           Case{polybus::test::ws_frame(0x81, std::string(300, 'y'), 0, key), true, 0, 1, true, 8,
                300, false},
       }) {
    INFO("header " << c.header << ", length " << c.length);
    WsFrameHead head;
    for (std::size_t cut = 0; cut < c.header; ++cut)
      CHECK_FALSE(read_ws_frame_head(std::string_view(c.frame).substr(0, cut), head));
    REQUIRE(read_ws_frame_head(std::string_view(c.frame).substr(0, c.header), head));
    CHECK(head.fin == c.fin);
    CHECK(head.rsv == c.rsv);
    CHECK(head.opcode == c.opcode);
    CHECK(head.masked == c.masked);
    CHECK(head.header == c.header);
    CHECK(head.length == c.length);
    CHECK(head.plain_text() == c.plain_text);
  }
  // A 64-bit length is read as sent, for the caller to refuse against its limit.
  WsFrameHead head;
  REQUIRE(read_ws_frame_head(std::string("\x81\x7f\xff\xff\xff\xff\xff\xff\xff\xff", 10), head));
  CHECK(head.length == ~std::uint64_t{0});
}
