// SPDX-License-Identifier: Apache-2.0
// WebSocket bytes as a test's peer writes them (RFC 6455): frames, and the accept key of a
// server's 101. Header-only, for the unit tests, the in-process server's tests and the fuzzers.
#pragma once

#include <websocketpp/base64/base64.hpp>
#include <websocketpp/sha1/sha1.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace polybus::test {

// One frame. `first` is its first byte (FIN, RSV bits, opcode). Its length takes the shortest
// form, or a longer one from min_length_form (0: 7 bits, 1: 16 bits, 2: 64 bits), as a peer
// may; the payload is masked with the 4 bytes at `mask` when given (a client's frame).
inline std::string ws_frame(unsigned char first, std::string_view payload, int min_length_form = 0,
                            const unsigned char* mask = nullptr) {
  std::string out(1, static_cast<char>(first));
  const unsigned char mask_bit = mask ? 0x80 : 0;
  const std::uint64_t n = payload.size();
  if (min_length_form == 0 && n < 126) {
    out.push_back(static_cast<char>(mask_bit | n));
  } else if (min_length_form <= 1 && n <= 0xFFFF) {
    out.push_back(static_cast<char>(mask_bit | 126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xFF));
  } else {
    out.push_back(static_cast<char>(mask_bit | 127));
    for (int shift = 56; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((n >> shift) & 0xFF));
  }
  if (!mask) return out.append(payload);
  out.append(reinterpret_cast<const char*>(mask), 4);
  for (std::size_t i = 0; i < payload.size(); ++i)
    out.push_back(static_cast<char>(payload[i] ^ static_cast<char>(mask[i % 4])));
  return out;
}

// The Sec-WebSocket-Accept answering the Sec-WebSocket-Key of an upgrade request ("x" when the
// request has none).
inline std::string ws_accept_for(std::string_view request) {
  constexpr std::string_view field = "Sec-WebSocket-Key: ";
  const std::size_t at = request.find(field);
  if (at == std::string_view::npos) return "x";
  const std::size_t start = at + field.size();
  std::string key(request.substr(start, request.find("\r\n", start) - start));
  key += "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  unsigned char digest[20];
  websocketpp::sha1::calc(key.data(), key.size(), digest);
  return websocketpp::base64_encode(digest, 20);
}

}  // namespace polybus::test
