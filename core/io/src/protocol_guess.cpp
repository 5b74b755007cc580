// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/protocol_guess.hpp"

#include <cstdint>

namespace polybus {
namespace {

std::uint32_t be32(std::string_view b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string guess_protocol(std::string_view b) {
  if (starts_with(b, "HTTP/1.") || starts_with(b, "HTTP/2")) return "HTTP";
  if (starts_with(b, "SSH-")) return "SSH";
  if (starts_with(b, "/qio/")) return "QuickIO";
  if (starts_with(b, std::string_view("\0SP\0", 4))) return "NNG";
  // A TLS record: handshake (0x16) or alert (0x15), version 3.x.
  if (b.size() >= 3 && (b[0] == '\x16' || b[0] == '\x15') && b[1] == '\x03' &&
      static_cast<unsigned char>(b[2]) <= 4)
    return "TLS";
  // NSQ: a 4-byte size, a frame type of 0, 1 or 2, and nsqd's text ("OK", "E_...", a heartbeat)
  // or JSON (IDENTIFY's answer).
  if (b.size() >= 10) {
    const std::uint32_t size = be32(b, 0), type = be32(b, 4);
    const std::string_view body = b.substr(8);
    if (size >= 4 && size < (1u << 24) && type <= 2 &&
        (starts_with(body, "OK") || starts_with(body, "E_") || starts_with(body, "_h") ||
         starts_with(body, "{")))
      return "NSQ";
  }
  // Figg: uint16 type 1 to 9, uint16 version 1, a uint32 payload size.
  if (b.size() >= 8) {
    const std::uint32_t type_and_version = be32(b, 0);
    const std::uint32_t type = type_and_version >> 16, version = type_and_version & 0xffff;
    if (type >= 1 && type <= 9 && version == 1 && be32(b, 4) < (1u << 26)) return "Figg";
  }
  return {};
}

std::string protocol_mismatch_hint(std::string_view first_bytes, std::string_view expected) {
  const std::string seen = guess_protocol(first_bytes);
  if (seen.empty() || seen == expected) return {};
  std::string hint = " (the server's first bytes look like " + seen;
  if (!expected.empty()) hint += ", not " + std::string(expected);
  if (seen == "TLS") return hint + ": does it need tls=true?)";
  return hint + ": wrong port or scheme?)";
}

}  // namespace polybus
