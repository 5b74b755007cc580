// SPDX-License-Identifier: Apache-2.0
// The CloudEvents 1.0 structured-mode codec (polybus/cloudevents.hpp) that the envelope uses:
// what it writes, what it reads back, and what it refuses, each named.
#include <catch2/catch.hpp>
#include <string>

#include "polybus/cloudevents.hpp"
#include "polybus/text/text.hpp"

using namespace polybus;
using namespace polybus::cloudevents;

namespace {

const Defaults kDefaults{"id-1", "/polybus", "polybus.message", "2026-11-25T03:40:00.000000Z"};

std::string encoded(std::string_view payload, const Headers& headers = {}) {
  std::string out;
  auto why = encode(payload, headers, kDefaults, 64, out);
  INFO(why);
  REQUIRE(why.empty());
  return out;
}

}  // namespace

TEST_CASE("base64 encodes and strictly decodes", "[cloudevents][text]") {
  for (std::string bytes : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                            std::string("foob"), std::string("\0\xff\x10 binary", 10)}) {
    std::string text;
    polybus::text::append_base64(text, bytes);
    std::string back;
    std::size_t bad_at = 0;
    REQUIRE(polybus::text::base64_decode(text, back, bad_at));
    CHECK(back == bytes);
  }
  std::string text;
  polybus::text::append_base64(text, "foobar");
  CHECK(text == "Zm9vYmFy");
  std::string out;
  std::size_t bad_at = 0;
  CHECK_FALSE(polybus::text::base64_decode("Zm9v YmFy", out, bad_at));  // not a multiple of 4
  CHECK_FALSE(polybus::text::base64_decode("Zm9v\nYmF", out, bad_at));
  CHECK(bad_at == 4);
  CHECK_FALSE(polybus::text::base64_decode("Zm=v", out, bad_at));  // padding inside
  CHECK_FALSE(polybus::text::base64_decode("Zm9v====", out, bad_at));
  CHECK_FALSE(polybus::text::base64_decode("Z===", out, bad_at));
}

TEST_CASE("cloudevents: text, JSON and binary payloads go where the spec puts them",
          "[cloudevents]") {
  CHECK(encoded("hello") ==
        R"({"specversion":"1.0","id":"id-1","source":"/polybus","type":"polybus.message",)"
        R"("time":"2026-11-25T03:40:00.000000Z","datacontenttype":"text/plain; charset=utf-8",)"
        R"("data":"hello"})");
  CHECK(encoded(R"({"a":[1,2]})", {{"datacontenttype", "application/json"}}) ==
        R"({"specversion":"1.0","id":"id-1","source":"/polybus","type":"polybus.message",)"
        R"("time":"2026-11-25T03:40:00.000000Z","datacontenttype":"application/json",)"
        R"("data":{"a":[1,2]}})");
  const std::string binary("\x00\xff\xfe", 3);
  CHECK(encoded(binary) ==
        R"({"specversion":"1.0","id":"id-1","source":"/polybus","type":"polybus.message",)"
        R"("time":"2026-11-25T03:40:00.000000Z","datacontenttype":"application/octet-stream",)"
        R"("data_base64":"AP/+"})");
  // A header sets an attribute; the rest are extensions, after the context attributes.
  CHECK(encoded("x", {{"traceparent", "00-abc-01"}, {"id", "mine"}, {"type", "order.placed"}}) ==
        R"({"specversion":"1.0","id":"mine","source":"/polybus","type":"order.placed",)"
        R"("time":"2026-11-25T03:40:00.000000Z","datacontenttype":"text/plain; charset=utf-8",)"
        R"("traceparent":"00-abc-01","data":"x"})");
}

TEST_CASE("cloudevents: what is written reads back, payload and headers", "[cloudevents]") {
  const std::string binary("\x00\xff\x10 binary", 10);
  struct Case {
    std::string payload;
    Headers headers;
  };
  for (const auto& c :
       {Case{"plain text \"quoted\" \\ \n", {{"correlationid", "c-42"}}}, Case{binary, {}},
        Case{"", {}},
        Case{R"([1, {"k": "v"}, null])", {{"datacontenttype", "application/cloudevents+json"}}},
        Case{"{} ", {{"datacontenttype", "application/json"}}},
        Case{"\n\t[2]", {{"datacontenttype", "text/json"}}},
        Case{"<x/>", {{"datacontenttype", "application/xml"}}}}) {
    const std::string json = encoded(c.payload, c.headers);
    Event event;
    auto why = decode(json, 64, event);
    INFO(json);
    REQUIRE(why.empty());
    CHECK(event.payload == c.payload);
    for (const auto& [name, value] : c.headers) CHECK(event.headers.get(name) == value);
    CHECK(event.headers.get("specversion") == "1.0");
    CHECK(event.headers.get("id") == "id-1");
    CHECK(event.headers.get("source") == "/polybus");
  }
}

TEST_CASE("cloudevents: events other SDKs write are read as they mean them", "[cloudevents]") {
  Event event;
  // No datacontenttype, data a string: the text (as the Python SDK hands it over).
  REQUIRE(decode(R"({"specversion":"1.0","id":"1","source":"s","type":"t","data":"hi"})", 64, event)
              .empty());
  CHECK(event.payload == "hi");
  // A JSON content type: data's JSON text, exactly as written, without copying.
  const std::string json =
      R"( { "data" : {"n": 1.50e3, "s": "\u00e9"} , "specversion":"1.0","id":"1","source":"s",)"
      R"("type":"t","datacontenttype":"application/json","ext":12,"flag":true,"gone":null} )";
  REQUIRE(decode(json, 64, event).empty());
  CHECK(event.payload == R"({"n": 1.50e3, "s": "\u00e9"})");
  CHECK(event.payload.data() >= json.data());
  CHECK(event.headers.get("ext") == "12");
  CHECK(event.headers.get("flag") == "true");
  CHECK_FALSE(event.headers.contains("gone"));
  // A scalar JSON value as data.
  REQUIRE(decode(R"({"specversion":"1.0","id":"1","source":"s","type":"t","data":42})", 64, event)
              .empty());
  CHECK(event.payload == "42");
  // No data at all.
  REQUIRE(decode(R"({"specversion":"1.0","id":"1","source":"s","type":"t"})", 64, event).empty());
  CHECK(event.payload.empty());
}

TEST_CASE("cloudevents: what is not a valid envelope is named, with where", "[cloudevents]") {
  Event event;
  auto why = [&](std::string json, std::size_t depth = 64) { return decode(json, depth, event); };
  CHECK_THAT(why("raw payload"), Catch::Contains("not JSON") && Catch::Contains("at byte 0"));
  CHECK_THAT(why(R"(["specversion"])"), Catch::Contains("not a JSON object"));
  CHECK_THAT(why(R"("text")"), Catch::Contains("not a JSON object"));
  CHECK_THAT(why(R"({"id":"1","source":"s","type":"t"})"), Catch::Contains("no specversion"));
  CHECK_THAT(why(R"({"specversion":"0.3","id":"1","source":"s","type":"t"})"),
             Catch::Contains("'0.3' is not 1.0"));
  CHECK_THAT(why(R"({"specversion":"1.0","source":"s","type":"t"})"), Catch::Contains("no id"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"","source":"s","type":"t"})"),
             Catch::Contains("id attribute is empty"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"1","id":"2","source":"s","type":"t"})"),
             Catch::Contains("'id' appears twice"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"1","source":"s","type":"t","ext":{"a":1}})"),
             Catch::Contains("'ext' is an object"));
  CHECK_THAT(
      why(R"({"specversion":"1.0","id":"1","source":"s","type":"t","data":1,"data_base64":"AA=="})"),
      Catch::Contains("both data and data_base64"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"1","source":"s","type":"t","data_base64":"A*=="})"),
             Catch::Contains("not base64"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"1","source":"s","type":"t","data":[[[[1]]]]})", 3),
             Catch::Contains("deeper than max_json_depth=3"));
  CHECK_THAT(why(R"({"specversion":"1.0","id":"1","source":"s","type":"t"} trailing)"),
             Catch::Contains("not JSON"));
  CHECK_THAT(why("{\"specversion\":\"1.0\",\"id\":\"\xff\"}"), Catch::Contains("not JSON"));
  CHECK_THAT(
      why("\xef\xbb\xbf{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\",\"type\":\"t\"}"),
      Catch::Contains("not JSON"));  // a BOM (RFC 8259 8.1)
  // RapidJSON would stop at a NUL and never read what follows it.
  CHECK_THAT(why(std::string(R"({"specversion":"1.0","id":"1","source":"s","type":"t"})") +
                 std::string("\0{junk", 6)),
             Catch::Contains("a NUL byte at byte 54"));
  std::string many = R"({"specversion":"1.0","id":"1","source":"s","type":"t")";
  for (int i = 0; i < 100; ++i) many += ",\"a" + std::to_string(i) + "\":\"v\"";
  CHECK_THAT(why(many + "}"), Catch::Contains("more than 64 attributes"));
}

TEST_CASE("cloudevents: headers the envelope cannot carry are refused, naming them",
          "[cloudevents]") {
  std::string out;
  auto why = [&](Headers headers, std::string_view payload = "x") {
    out.clear();
    auto text = encode(payload, headers, kDefaults, 64, out);
    if (!text.empty()) CHECK(out.empty());
    return text;
  };
  CHECK_THAT(why({{"Correlation-Id", "1"}}),
             Catch::Contains("'C' at 0") && Catch::Contains("a-z and 0-9"));
  CHECK_THAT(why({{"averyveryverylongname1", "1"}}), Catch::Contains("22 characters"));
  CHECK_THAT(why({{"data", "1"}}), Catch::Contains("envelope's own"));
  CHECK_THAT(why({{"specversion", "1.0"}}), Catch::Contains("envelope's own"));
  CHECK_THAT(why({{"", "1"}}), Catch::Contains("empty"));
  CHECK_THAT(why({{"source", ""}}), Catch::Contains("requires it"));
  CHECK_THAT(why({{"note", "\xff"}}), Catch::Contains("not valid UTF-8"));
  CHECK_THAT(why({{"datacontenttype", "application/json"}}, "{not json"),
             Catch::Contains("says JSON"));
  CHECK_THAT(why({{"datacontenttype", "application/json"}}, std::string("null\0x", 6)),
             Catch::Contains("says JSON"));
  CHECK(check_header_name("traceparent").empty());
  CHECK(check_header_name("deadletterattempts").empty());
}

TEST_CASE("cloudevents: time is RFC 3339 UTC with microseconds", "[cloudevents]") {
  CHECK(format_time(0) == "1970-01-01T00:00:00.000000Z");
  CHECK(format_time(1'764'042'000'123'456'789) == "2025-11-25T03:40:00.123456Z");
  CHECK(is_json_content_type("application/json; charset=utf-8"));
  CHECK(is_json_content_type("application/cloudevents+JSON"));
  CHECK_FALSE(is_json_content_type("text/plain"));
}
