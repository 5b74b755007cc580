// SPDX-License-Identifier: Apache-2.0
// MemoDB's memo01 codec: the real broker's example bytes, deterministic (shortest) CBOR, the
// header/payload split, and hostile input rejected with a named error.
#include <catch2/catch.hpp>
#include <random>

#include "polybus/memodb/codec.hpp"

using namespace polybus::memodb;

namespace {

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string unhex(std::string_view text) {
  std::string out;
  auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<char>(value(text[i]) * 16 + value(text[i + 1])));
  return out;
}

// "memo01" as CBOR text: 66 6d656d6f3031
const std::string kVersion = "666d656d6f3031";

std::error_code decode_hex(const std::string& text, Header& header, std::string_view& payload,
                           std::string& storage) {
  storage = unhex(text);
  return decode(storage, header, payload);
}

std::error_code decode_error(const std::string& text) {
  Header header;
  std::string_view payload;
  std::string storage;
  return decode_hex(text, header, payload, storage);
}

}  // namespace

TEST_CASE("READY encodes exactly as the real broker's example", "[memodb][codec]") {
  std::string out;
  REQUIRE(append_ready(out, {"echo", "alive.tv"}) == std::error_code{});
  // From shared/notes/memodb.md: 84 66 "memo01" 01 40 82 64 "echo" 68 "alive.tv"
  CHECK(hex(out) == "84" + kVersion +
                        "01"
                        "40"
                        "82"
                        "64" +
                        hex("echo") + "68" + hex("alive.tv"));
}

TEST_CASE("READY sorts service names by length then bytewise and drops repeats",
          "[memodb][codec]") {
  std::string expected, out;
  REQUIRE(append_ready(expected, {"echo", "alive.tv"}) == std::error_code{});
  REQUIRE(append_ready(out, {"alive.tv", "echo", "alive.tv", "echo"}) == std::error_code{});
  CHECK(hex(out) == hex(expected));

  CHECK(canonical_services({"bb", "a", "ab", "b", "ccc", "a"}) ==
        std::vector<std::string>{"a", "b", "ab", "bb", "ccc"});
  // Bytewise means unsigned: 0xc3 sorts after 'z'.
  CHECK(canonical_services({"\xc3\xa9", "zz"}) == std::vector<std::string>{"zz", "\xc3\xa9"});
  CHECK(service_order("z", "aa"));
  CHECK_FALSE(service_order("aa", "aa"));
}

TEST_CASE("READY refuses names the broker would drop", "[memodb][codec]") {
  std::string out;
  CHECK(append_ready(out, {}) == errc::invalid_service);
  CHECK(append_ready(out, {"echo", ""}) == errc::invalid_service);
  CHECK(append_ready(out, {std::string(256, 'x')}) == errc::field_too_long);
  CHECK(append_ready(out, {"bad\xff"}) == errc::invalid_service);
  CHECK(append_ready(out, {"\xc0\x80"}) == errc::invalid_service);      // overlong NUL
  CHECK(append_ready(out, {"\xed\xa0\x80"}) == errc::invalid_service);  // surrogate
  CHECK(append_ready(out, {"\xe2\x82"}) == errc::invalid_service);      // cut short
  std::vector<std::string> many;
  for (std::size_t i = 0; i <= kMaxServices; ++i) many.push_back("s" + std::to_string(i));
  CHECK(append_ready(out, many) == errc::field_too_long);
  CHECK(out.empty());  // nothing is written on error
  CHECK(append_ready(out, {std::string(255, 'x'), "\xc3\xa9t\xc3\xa9"}) == std::error_code{});
}

TEST_CASE("JOB encodes exactly as the real broker's example, payload after the header",
          "[memodb][codec]") {
  std::string out;
  REQUIRE(append_job(out, "", "echo", 5000) == std::error_code{});
  out += "hello";
  // From shared/notes/memodb.md: 85 66 "memo01" 02 40 64 "echo" 19 1388 <payload>
  CHECK(hex(out) == "85" + kVersion +
                        "02"
                        "40"
                        "64" +
                        hex("echo") + "191388" + hex("hello"));

  Header header;
  std::string_view payload;
  REQUIRE(decode(out, header, payload) == std::error_code{});
  CHECK(header.type == MessageType::job);
  CHECK(header.id.empty());
  CHECK(header.service == "echo");
  CHECK(header.timeout_ms == 5000);
  CHECK(payload == "hello");
}

TEST_CASE("the other message types encode byte for byte", "[memodb][codec]") {
  const std::string id = unhex("0a0b0c0d");
  std::string out;
  REQUIRE(append_result(out, "") == std::error_code{});
  CHECK(hex(out) == "83" + kVersion +
                        "03"
                        "40");  // what the broker hands a client
  out.clear();
  REQUIRE(append_result(out, id, true) == std::error_code{});
  CHECK(hex(out) == "84" + kVersion +
                        "03"
                        "440a0b0c0d"
                        "f5");
  out.clear();
  REQUIRE(append_result(out, id, false) == std::error_code{});
  CHECK(hex(out) == "84" + kVersion +
                        "03"
                        "440a0b0c0d"
                        "f4");
  out.clear();
  REQUIRE(append_heartbeat(out, id) == std::error_code{});
  CHECK(hex(out) == "83" + kVersion +
                        "04"
                        "440a0b0c0d");
  out.clear();
  REQUIRE(append_disconnect(out, id) == std::error_code{});
  CHECK(hex(out) == "83" + kVersion +
                        "05"
                        "440a0b0c0d");
  out.clear();
  REQUIRE(append_job(out, id, "echo", 0) == std::error_code{});  // as forwarded to a worker
  CHECK(hex(out) == "85" + kVersion +
                        "02"
                        "440a0b0c0d"
                        "64" +
                        hex("echo") + "00");
  out.clear();
  CHECK(append_heartbeat(out, std::string(kMaxIdLength + 1, 'i')) == errc::field_too_long);
  CHECK(append_job(out, "", "", 1) == errc::invalid_service);
  CHECK(out.empty());
}

TEST_CASE("integers and lengths take their shortest form", "[memodb][codec]") {
  struct Case {
    std::uint64_t value;
    const char* head;
  };
  const Case cases[] = {
      {0, "00"},
      {23, "17"},
      {24, "1818"},
      {255, "18ff"},
      {256, "190100"},
      {65535, "19ffff"},
      {65536, "1a00010000"},
      {4294967295u, "1affffffff"},
      {4294967296u, "1b0000000100000000"},
      {18446744073709551615u, "1bffffffffffffffff"},
  };
  for (const auto& c : cases) {
    INFO(c.value);
    std::string out;
    REQUIRE(append_job(out, "", "e", c.value) == std::error_code{});
    CHECK(hex(out) == "85" + kVersion +
                          "02"
                          "40"
                          "6165" +
                          c.head);
    Header header;
    std::string_view payload;
    REQUIRE(decode(out, header, payload) == std::error_code{});
    CHECK(header.timeout_ms == c.value);
  }
  struct Length {
    std::size_t size;
    const char* head;
  };
  for (const auto& c : {Length{23, "77"}, Length{24, "7818"}, Length{255, "78ff"}}) {
    std::string out;
    REQUIRE(append_job(out, "", std::string(c.size, 's'), 1) == std::error_code{});
    CHECK(hex(out).substr(2 + kVersion.size() + 4, std::string(c.head).size()) == c.head);
  }
  for (const auto& c : {Length{23, "57"}, Length{24, "5818"}, Length{64, "5840"}}) {
    std::string out;
    REQUIRE(append_heartbeat(out, std::string(c.size, 'i')) == std::error_code{});
    CHECK(hex(out).substr(2 + kVersion.size() + 2, std::string(c.head).size()) == c.head);
  }
}

TEST_CASE("decode gives every field back and the exact payload", "[memodb][codec]") {
  std::string ready;
  REQUIRE(append_ready(ready, {"echo", "alive.tv", "a"}) == std::error_code{});
  Header header;
  std::string_view payload;
  REQUIRE(decode(ready, header, payload) == std::error_code{});
  CHECK(header.type == MessageType::ready);
  CHECK(header.services == std::vector<std::string_view>{"a", "echo", "alive.tv"});
  CHECK(payload.empty());

  std::string result;
  REQUIRE(append_result(result, "\x01\x02\x03\x04", true) == std::error_code{});
  // A payload that itself looks like CBOR (and like a break) stays byte for byte.
  std::string body = std::string("\xff\x9f\x00\x84", 4) + std::string(1000, '\0');
  result += body;
  REQUIRE(decode(result, header, payload) == std::error_code{});
  CHECK(header.type == MessageType::result);
  CHECK(header.id == std::string_view("\x01\x02\x03\x04", 4));
  CHECK(header.disconnecting == std::optional<bool>(true));
  CHECK(payload == body);

  std::string plain;
  REQUIRE(append_result(plain, "") == std::error_code{});
  REQUIRE(decode(plain, header, payload) == std::error_code{});
  CHECK_FALSE(header.disconnecting.has_value());

  std::string big;
  REQUIRE(append_job(big, "", "echo", 1) == std::error_code{});
  const std::size_t header_size = big.size();
  big.append(8 << 20, 'p');
  REQUIRE(decode(big, header, payload) == std::error_code{});
  CHECK(payload.size() == std::size_t{8} << 20);
  CHECK(payload.data() == big.data() + header_size);  // a view, no copy
}

TEST_CASE("decode accepts the non-shortest forms the broker accepts", "[memodb][codec]") {
  Header header;
  std::string_view payload;
  std::string storage;
  // Array head 98 05, type 18 02, ID with a one-byte length, service 78 04, timeout 1b ...1388.
  REQUIRE(decode_hex("9805" + kVersion +
                         "1802"
                         "5800"
                         "7804" +
                         hex("echo") + "1b0000000000001388",
                     header, payload, storage) == std::error_code{});
  CHECK(header.type == MessageType::job);
  CHECK(header.timeout_ms == 5000);
  // Service names out of order are not: the broker drops such a READY.
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "82"
                     "68" +
                     hex("alive.tv") + "64" + hex("echo")) == errc::unsorted_services);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "82"
                     "64" +
                     hex("echo") + "64" + hex("echo")) == errc::unsorted_services);
}

TEST_CASE("hostile input fails with the error that names it", "[memodb][codec]") {
  CHECK(decode_error("") == errc::empty_message);
  CHECK(decode_error("ff") == errc::malformed_cbor);  // a stray break
  CHECK(decode_error("1c") == errc::malformed_cbor);  // reserved additional information
  CHECK(decode_error("a0") == errc::wrong_type);      // a map, not an array
  CHECK(decode_error("64" + hex("memo")) == errc::wrong_type);
  CHECK(decode_error("9f" + kVersion + "0440ff") == errc::indefinite_length);
  CHECK(decode_error("83"
                     "7f"
                     "66" +
                     hex("memo01") +
                     "ff"
                     "0440") == errc::indefinite_length);
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "5f40ff") == errc::indefinite_length);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "9f"
                     "64" +
                     hex("echo") + "ff") == errc::indefinite_length);
  CHECK(decode_error("83"
                     "66" +
                     hex("memo02") + "0440") == errc::wrong_version);
  CHECK(decode_error("83"
                     "65" +
                     hex("memo0") + "0440") == errc::wrong_version);
  CHECK(decode_error("83"
                     "46" +
                     hex("memo01") + "0440") == errc::wrong_type);
  CHECK(decode_error("83"
                     "83" +
                     kVersion +
                     "0440"
                     "0440") == errc::nesting);
  CHECK(decode_error("83" + kVersion +
                     "00"
                     "40") == errc::unknown_type);
  CHECK(decode_error("83" + kVersion +
                     "06"
                     "40") == errc::unknown_type);
  CHECK(decode_error("83" + kVersion +
                     "18ff"
                     "40") == errc::unknown_type);
  CHECK(decode_error("83" + kVersion +
                     "20"
                     "40") == errc::unknown_type);  // -1
  CHECK(decode_error("83" + kVersion +
                     "6131"
                     "40") == errc::wrong_type);
  CHECK(decode_error("82" + kVersion + "04") == errc::wrong_field_count);
  CHECK(decode_error("86" + kVersion +
                     "04"
                     "40"
                     "00"
                     "00"
                     "00") == errc::wrong_field_count);
  CHECK(decode_error("9bffffffffffffffff" + kVersion) == errc::wrong_field_count);
  CHECK(decode_error("84" + kVersion +
                     "04"
                     "40"
                     "00") == errc::wrong_field_count);  // HEARTBEAT
  CHECK(decode_error("83" + kVersion +
                     "01"
                     "40") == errc::wrong_field_count);  // READY
  CHECK(decode_error("84" + kVersion +
                     "02"
                     "40"
                     "6165") == errc::wrong_field_count);  // JOB
  CHECK(decode_error("85" + kVersion +
                     "03"
                     "40"
                     "f5"
                     "00") == errc::wrong_field_count);
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "6161") == errc::wrong_type);  // text ID
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "f6") == errc::wrong_type);  // null ID
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "c240") == errc::wrong_type);  // tagged ID
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "5841" +
                     std::string(130, 'a')) == errc::field_too_long);
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "a0") == errc::nesting);
  CHECK(decode_error("84" + kVersion +
                     "03"
                     "40"
                     "01") == errc::wrong_type);  // not a bool
  CHECK(decode_error("84" + kVersion +
                     "03"
                     "40"
                     "f6") == errc::wrong_type);
  CHECK(decode_error("84" + kVersion +
                     "03"
                     "40"
                     "fa3f800000") == errc::wrong_type);
  CHECK(decode_error("84" + kVersion +
                     "03"
                     "40"
                     "80") == errc::nesting);
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "60"
                     "01") == errc::invalid_service);
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "62c328"
                     "01") == errc::invalid_service);
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "6165"
                     "20") == errc::wrong_type);  // negative
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "6165"
                     "f93c00") == errc::wrong_type);
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "78ff" +
                     std::string(510, '6') + "01")
            .value() == 0);
  CHECK(decode_error("85" + kVersion +
                     "02"
                     "40"
                     "790100" +
                     std::string(512, '6') + "01") == errc::field_too_long);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "6165") == errc::wrong_type);  // not a list
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "99ffff") == errc::field_too_long);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "81"
                     "81"
                     "6165") == errc::nesting);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "81"
                     "a0") == errc::nesting);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "81"
                     "40") == errc::wrong_type);
  CHECK(decode_error("84" + kVersion +
                     "01"
                     "40"
                     "81"
                     "60") == errc::invalid_service);
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "7bffffffffffffffff") == errc::truncated);
  CHECK(decode_error("83" + kVersion +
                     "04"
                     "5bffffffffffffffff") == errc::truncated);
}

TEST_CASE("deep nesting is refused at the first level, without recursion", "[memodb][codec]") {
  std::string deep = unhex("83" + kVersion + "04");
  deep.append(1 << 20, '\x81');
  deep.push_back('\x40');
  Header header;
  std::string_view payload;
  CHECK(decode(deep, header, payload) == errc::nesting);
  std::string top(1 << 20, '\x81');
  CHECK(decode(top, header, payload) == errc::wrong_field_count);
}

TEST_CASE("every truncation of a header is reported as truncated", "[memodb][codec]") {
  std::vector<std::string> messages(5);
  REQUIRE(append_ready(messages[0], {"echo", "alive.tv"}) == std::error_code{});
  REQUIRE(append_job(messages[1], "\x01\x02\x03\x04", "echo", 5000) == std::error_code{});
  REQUIRE(append_result(messages[2], "\x01\x02\x03\x04", true) == std::error_code{});
  REQUIRE(append_heartbeat(messages[3], "\x01\x02\x03\x04") == std::error_code{});
  REQUIRE(append_disconnect(messages[4], "\x01\x02\x03\x04") == std::error_code{});
  for (const auto& full : messages) {
    Header header;
    std::string_view payload;
    REQUIRE(decode(full, header, payload) == std::error_code{});
    for (std::size_t n = 1; n < full.size(); ++n) {
      INFO(hex(full) << " cut to " << n);
      CHECK(decode(std::string_view(full).substr(0, n), header, payload) == errc::truncated);
    }
  }
}

TEST_CASE("the memodb category names its errors", "[memodb][codec]") {
  std::error_code ec = errc::unsorted_services;
  CHECK(std::string(ec.category().name()) == "memodb");
  CHECK(ec.message().find("sorted") != std::string::npos);
  for (int e = 1; e <= static_cast<int>(errc::unsorted_services); ++e)
    CHECK(make_error_code(static_cast<errc>(e)).message().rfind("memodb", 0) == 0);
  CHECK(std::string(to_string(MessageType::heartbeat)) == "HEARTBEAT");
}

TEST_CASE("random corruption of valid messages never crashes the decoder", "[memodb][codec]") {
  std::vector<std::string> seeds(4);
  REQUIRE(append_ready(seeds[0], {"echo", "alive.tv", "x"}) == std::error_code{});
  REQUIRE(append_job(seeds[1], "\x01\x02\x03\x04", "echo", 5000) == std::error_code{});
  seeds[1] += "payload";
  REQUIRE(append_result(seeds[2], "\x01\x02\x03\x04", false) == std::error_code{});
  REQUIRE(append_heartbeat(seeds[3], "") == std::error_code{});
  std::mt19937 random(12345);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string m = seeds[round % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      switch (random() % 3) {
        case 0:
          m[random() % m.size()] = static_cast<char>(random());
          break;
        case 1:
          m.resize(random() % m.size());
          break;
        default:
          m.insert(m.begin() + static_cast<long>(random() % (m.size() + 1)),
                   static_cast<char>(random()));
      }
    }
    Header header;
    std::string_view payload;
    if (!decode(m, header, payload)) {
      ++accepted;
      CHECK(payload.data() + payload.size() == m.data() + m.size());
      CHECK(static_cast<int>(header.type) >= 1);
      CHECK(static_cast<int>(header.type) <= 5);
    }
  }
  CHECK(accepted < 20000);
}
