// SPDX-License-Identifier: Apache-2.0
// The shared text helpers (polybus/text/text.hpp) that the codecs, adapters and in-process
// brokers use: each case is written out by hand, so the fuzzers that lean on is_valid_utf8 as
// their oracle lean on something pinned down here.
#include <catch2/catch.hpp>
#include <string>

#include "polybus/text/text.hpp"

using namespace polybus::text;

TEST_CASE("utf8_sequence reads one code point and refuses what is not UTF-8", "[text]") {
  std::uint32_t code_point = 0;
  CHECK(utf8_sequence("A", code_point) == 1);
  CHECK(code_point == 'A');
  CHECK(utf8_sequence("\xc3\xa9x", code_point) == 2);
  CHECK(code_point == 0xe9);
  CHECK(utf8_sequence("\xe2\x82\xac", code_point) == 3);
  CHECK(code_point == 0x20ac);
  CHECK(utf8_sequence("\xf0\x9f\x98\x80", code_point) == 4);
  CHECK(code_point == 0x1f600);
  CHECK(utf8_sequence("\xf4\x8f\xbf\xbf", code_point) == 4);  // U+10FFFF, the last
  CHECK(utf8_sequence("", code_point) == 0);
  CHECK(utf8_sequence("\xc0\xaf", code_point) == 0);              // overlong '/'
  CHECK(utf8_sequence("\xe0\x80\xaf", code_point) == 0);          // overlong, 3 bytes
  CHECK(utf8_sequence("\xed\xa0\x80", code_point) == 0);          // surrogate U+D800
  CHECK(utf8_sequence("\xed\xbf\xbf", code_point) == 0);          // surrogate U+DFFF
  CHECK(utf8_sequence("\xf4\x90\x80\x80", code_point) == 0);      // over U+10FFFF
  CHECK(utf8_sequence("\xe2\x82", code_point) == 0);              // truncated
  CHECK(utf8_sequence("\xe2\x28\xa1", code_point) == 0);          // bad continuation
  CHECK(utf8_sequence("\x80", code_point) == 0);                  // stray continuation
  CHECK(utf8_sequence("\xf8\x88\x80\x80\x80", code_point) == 0);  // 5-byte form
}

TEST_CASE("is_valid_utf8 checks every sequence of the text", "[text]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain"));
  CHECK(is_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  CHECK(is_valid_utf8(std::string("nul\0inside", 10)));
  CHECK_FALSE(is_valid_utf8("ok\xc0\xaf"));
  CHECK_FALSE(is_valid_utf8("ok\xed\xa0\x80"));
  CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));
  CHECK_FALSE(is_valid_utf8("ends short \xe2\x82"));
  CHECK_FALSE(is_valid_utf8("\x80"));
  CHECK_FALSE(is_valid_utf8("\xff"));
}

TEST_CASE("is_valid_utf8 reads ASCII eight bytes at a time and every sequence across the words",
          "[text]") {
  const std::string ascii = "abcdefghijklmnop";  // two whole words
  CHECK(is_valid_utf8(ascii));
  CHECK(is_valid_utf8(ascii + "\xc3\xa9" + ascii));
  CHECK(is_valid_utf8("abcdefg\xc3\xa9"));            // a sequence across a word's end
  CHECK(is_valid_utf8("abcdefg\xf0\x9f\x98\x80zz"));  // four bytes across it
  CHECK_FALSE(is_valid_utf8(ascii + "\xff"));         // after whole words
  CHECK_FALSE(is_valid_utf8("abcdefg\xff" + ascii));  // the last byte of a word
  CHECK_FALSE(is_valid_utf8(ascii + "abc\xe2\x82"));  // short at the very end
  CHECK_FALSE(
      is_valid_utf8("abcdefg\xe2\x82"
                    "abcdefgh"));  // a continuation missing
}

TEST_CASE("json_quote passes runs of plain bytes, UTF-8 included, and escapes the rest", "[text]") {
  std::string text;
  for (int c = 0; c < 256; ++c) text += static_cast<char>(c);
  const std::string quoted = json_quote(text);
  const std::string go = json_quote(text, JsonEscapes::go);
  // Every byte from 0x20 up stands for itself but the quote and the backslash (and, for Go, < > &);
  // every byte below 0x20 is escaped.
  for (int c = 0x20; c < 256; ++c) {
    const std::string byte(1, static_cast<char>(c));
    const bool escaped = c == '"' || c == '\\';
    const bool go_escaped = escaped || c == '<' || c == '>' || c == '&';
    INFO("byte " << c);
    CHECK((json_quote(byte) == "\"" + byte + "\"") == !escaped);
    CHECK((json_quote(byte, JsonEscapes::go) == "\"" + byte + "\"") == !go_escaped);
  }
  for (int c = 0; c < 0x20; ++c) CHECK(json_quote(std::string(1, static_cast<char>(c))).size() > 3);
  // Quotes, \b \f \n \r \t, 27 more as \u00XX, \" and \\, 222 plain; Go: \b and \f as
  // \u00XX too, and < > & as \u003c \u003e \u0026.
  CHECK(quoted.size() == 2 + 5 * 2 + 27 * 6 + 2 * 2 + 222);
  CHECK(go.size() == quoted.size() + 2 * 4 + 3 * 5);
}

TEST_CASE("json_quote writes standard escapes, or Go's encoding/json ones", "[text]") {
  const std::string text = "a\"b\\c\nd\re\tf\bg\fh\x01<&>\x7f\xc3\xa9";
  CHECK(json_quote(text) == "\"a\\\"b\\\\c\\nd\\re\\tf\\bg\\fh\\u0001<&>\x7f\xc3\xa9\"");
  CHECK(json_quote(text, JsonEscapes::go) ==
        "\"a\\\"b\\\\c\\nd\\re\\tf\\u0008g\\u000ch\\u0001\\u003c\\u0026\\u003e\x7f\xc3\xa9\"");
  CHECK(json_quote("") == "\"\"");
  std::string out = "prefix:";
  append_json_quoted(out, "x\x1f");
  CHECK(out == "prefix:\"x\\u001f\"");
}

TEST_CASE("percent_encode keeps unreserved bytes and escapes the rest, which decode back",
          "[text]") {
  CHECK(percent_encode("topic_1.x-y~") == "topic_1.x-y~");
  CHECK(percent_encode("t#ephemeral") == "t%23ephemeral");  // not a fragment
  CHECK(percent_encode("a b&c=d+e%") == "a%20b%26c%3dd%2be%25");
  CHECK(percent_encode(std::string("\x00\xff", 2)) == "%00%ff");
  const std::string all = [] {
    std::string bytes;
    for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
    return bytes;
  }();
  std::string back;
  REQUIRE(percent_decode(percent_encode(all), back, true) == PercentError::none);
  CHECK(back == all);
}

TEST_CASE("percent_decode decodes %XX and, for forms, '+', naming what is wrong", "[text]") {
  std::string out;
  CHECK(percent_decode("a%20b+c%2B%2f", out, true) == PercentError::none);
  CHECK(out == "a b c+/");
  CHECK(percent_decode("a+b", out, false) == PercentError::none);
  CHECK(out == "a+b");
  CHECK(percent_decode("%00", out, true) == PercentError::none);
  CHECK(out == std::string(1, '\0'));
  CHECK(percent_decode("ab%4", out, true) == PercentError::truncated_escape);
  CHECK(out == "ab");
  CHECK(percent_decode("%", out, true) == PercentError::truncated_escape);
  CHECK(percent_decode("%zz", out, true) == PercentError::bad_escape);
  CHECK(percent_decode("%4g", out, true) == PercentError::bad_escape);
  CHECK(std::string(describe(PercentError::truncated_escape)) == "truncated %-escape");
  CHECK(std::string(describe(PercentError::bad_escape)) == "bad %-escape");
}

TEST_CASE("hex digits, ASCII lowercase, HTTP and JSON trimming", "[text]") {
  CHECK(hex_digit_value('0') == 0);
  CHECK(hex_digit_value('a') == 10);
  CHECK(hex_digit_value('F') == 15);
  CHECK(hex_digit_value('g') == -1);
  CHECK(hex_digit_value('/') == -1);
  std::string out;
  append_hex_byte(out, "\\x", 0xab);
  CHECK(out == "\\xab");
  CHECK(ascii_lower("Content-LENGTH \xc3\x89") == "content-length \xc3\x89");
  CHECK(trim_http_space(" \tvalue \t\r") == "value");
  CHECK(trim_http_space("   ").empty());
  CHECK(trim_json_space(" \t\r\n\"abc\" \n") == "\"abc\"");
  CHECK(trim_json_space("\"a b\"") == "\"a b\"");
  CHECK(trim_json_space(" \n ").empty());
}

TEST_CASE("is_valid_json takes one RFC 8259 value within the depth bound, and nothing else",
          "[text]") {
  for (const char* good :
       {"null", "true", "false", " \t\r\n0 ", "-0", "-0.5e+10", "1E-3", "12345678901234567890",
        "1e400", "\"\"", "\"a \\\" \\\\ \\/ \\b\\f\\n\\r\\t\\u00e9\\u00E9\"", "\"\\ud83d\\ude00\"",
        "\"\\udc00\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "[]", "{}",
        "[1,[2,{\"a\":[]}],{}]", "{\"k\" : {\"n\": [true, false, null]}, \"e\": {}}"}) {
    INFO(good);
    CHECK(is_valid_json(good, 64));
  }
  for (const char* bad : {"",
                          " ",
                          "nul",
                          "nulls",
                          "True",
                          "01",
                          "-",
                          "1.",
                          ".5",
                          "1e",
                          "1e+",
                          "+1",
                          "0x10",
                          "\"open",
                          "\"\\x\"",
                          "\"\\u12\"",
                          "\"\\u12g4\"",
                          "\"\\ud800\"",
                          "\"\\ud800\\u0041\"",
                          "\"tab\there\"",
                          "\"\xc3\x28\"",
                          "\"\xed\xa0\x80\"",
                          "\"\xc0\xaf\"",
                          "\xef\xbb\xbf{}",
                          "[1,]",
                          "[1 2]",
                          "{\"a\":1,}",
                          "{\"a\"}",
                          "{1:2}",
                          "{\"a\":1]",
                          "[",
                          "]",
                          "1 2",
                          "[]x"}) {
    INFO(bad);
    CHECK_FALSE(is_valid_json(bad, 64));
  }
  CHECK_FALSE(is_valid_json(std::string("null\0", 5), 64));  // a NUL ends nothing
  CHECK_FALSE(is_valid_json(std::string("\"a\0b\"", 5), 64));
}

TEST_CASE("is_valid_json bounds nesting and judges deep input iteratively", "[text]") {
  CHECK(is_valid_json("[[{\"a\":[1]}]]", 4));
  CHECK_FALSE(is_valid_json("[[{\"a\":[1]}]]", 3));
  CHECK_FALSE(is_valid_json("[]", 0));
  // Past the 64 levels kept inline, objects and arrays still close in the right order.
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += i % 2 ? "{\"k\":" : "[";
  std::string closing;
  for (int i = 4999; i >= 0; --i) closing += i % 2 ? "}" : "]";
  CHECK(is_valid_json(deep + "1" + closing, 5000));
  CHECK_FALSE(is_valid_json(deep + "1" + closing, 4999));
  std::string swapped = closing;
  std::swap(swapped[10], swapped[11]);  // a '}' where a ']' belongs, 4,000 levels down
  CHECK_FALSE(is_valid_json(deep + "1" + swapped, 5000));
  CHECK_FALSE(is_valid_json(deep + "1" + closing.substr(1), 5000));  // one left open
}

// Quoting and checking test eight bytes at a time: a byte that needs care is found wherever it
// sits in a word, next to plain bytes on either side.
TEST_CASE("json_quote and is_valid_json find a special byte at every place in a word", "[text]") {
  const std::string plain = "abcdefghijklmnopqrstuvwx";  // three words
  const auto quoted_bytewise = [](const std::string& text, JsonEscapes escapes) {
    std::string out = "\"";
    for (char c : text) {
      const std::string one = json_quote(std::string(1, c), escapes);  // no whole word
      out += one.substr(1, one.size() - 2);
    }
    return out + "\"";
  };
  const std::string specials[] = {"\"", "\\",   "\n",      std::string(1, '\0'), "\x1f", "<", ">",
                                  "&",  "\x7f", "\xc3\xa9"};
  for (const auto& special : specials) {
    for (std::size_t at = 0; at <= plain.size(); ++at) {
      const std::string text = plain.substr(0, at) + special + plain.substr(at);
      INFO("special byte " << static_cast<int>(static_cast<unsigned char>(special[0])) << " at "
                           << at);
      CHECK(json_quote(text) == quoted_bytewise(text, JsonEscapes::standard));
      CHECK(json_quote(text, JsonEscapes::go) == quoted_bytewise(text, JsonEscapes::go));
      // A backslash stays valid where the letter after it makes an escape (\b \f \n \r \t).
      const bool stands =
          special == "\\"
              ? at < plain.size() && std::string("bfnrt").find(plain[at]) != std::string::npos
              : special != "\"" && static_cast<unsigned char>(special[0]) >= 0x20;
      CHECK(is_valid_json("\"" + text + "\"", 8) == stands);
      CHECK(is_valid_json(json_quote(text), 8));
    }
  }
  CHECK_FALSE(is_valid_json("\"" + plain + "\xff" + plain + "\"", 8));
  CHECK(is_valid_json("\"" + plain + "\\n" + plain + "\"", 8));
}
