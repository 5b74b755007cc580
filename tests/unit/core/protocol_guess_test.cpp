// SPDX-License-Identifier: Apache-2.0
// Telling protocols apart by a server's first bytes, for "wrong port or scheme?" hints.
#include <catch2/catch.hpp>

#include "polybus/io/protocol_guess.hpp"

using namespace polybus;

namespace {
std::string bytes(std::initializer_list<int> values, std::string_view tail = {}) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out + std::string(tail);
}
}  // namespace

TEST_CASE("first bytes name the protocol that sent them", "[protocol_guess]") {
  CHECK(guess_protocol("HTTP/1.1 400 Bad Request\r\n") == "HTTP");
  CHECK(guess_protocol("SSH-2.0-OpenSSH_9.2") == "SSH");
  CHECK(guess_protocol("/qio/ohai") == "QuickIO");
  CHECK(guess_protocol(bytes({0, 'S', 'P', 0, 0, 0x30, 0, 0})) == "NNG");
  CHECK(guess_protocol(bytes({0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46})) == "TLS");
  CHECK(guess_protocol(bytes({0x16, 0x03, 0x01, 0x02, 0x00})) == "TLS");
  // nsqd's answer to a bad magic: a 4-byte size, frame type 1 (error), the text.
  CHECK(guess_protocol(bytes({0, 0, 0, 18, 0, 0, 0, 1}, "E_BAD_PROTOCOL")) == "NSQ");
  CHECK(guess_protocol(bytes({0, 0, 0, 6, 0, 0, 0, 0}, "OK")) == "NSQ");
  CHECK(guess_protocol(bytes({0, 0, 0, 40, 0, 0, 0, 0}, "{\"max_rdy_count\"")) == "NSQ");
  // Figg: type ACK (3), version 1, payload 8.
  CHECK(guess_protocol(bytes({0, 3, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1})) == "Figg");
  CHECK(guess_protocol("").empty());
  CHECK(guess_protocol("hello world, nothing known").empty());
  CHECK(guess_protocol(bytes({0, 0, 0, 0})).empty());
}

TEST_CASE("the hint names what was seen and what was expected, and only when they differ",
          "[protocol_guess]") {
  const auto nsq = bytes({0, 0, 0, 18, 0, 0, 0, 1}, "E_BAD_PROTOCOL");
  CHECK(protocol_mismatch_hint(nsq, "Figg") ==
        " (the server's first bytes look like NSQ, not Figg: wrong port or scheme?)");
  CHECK(protocol_mismatch_hint(nsq, "NSQ").empty());
  CHECK(protocol_mismatch_hint("garbage bytes here", "NSQ").empty());
  CHECK(protocol_mismatch_hint(bytes({0x15, 0x03, 0x03, 0x00, 0x02}), "QuickIO") ==
        " (the server's first bytes look like TLS, not QuickIO: does it need tls=true?)");
}
