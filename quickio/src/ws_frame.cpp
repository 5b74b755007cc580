// SPDX-License-Identifier: Apache-2.0
#include <cstring>

#include "polybus/quickio/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::quickio {

void append_masked_text_frame(std::string& out, std::string_view payload, std::uint32_t mask) {
  const std::size_t n = payload.size();
  out.push_back(static_cast<char>(0x81));  // FIN, opcode 1 (text)
  if (n < 126) {
    out.push_back(static_cast<char>(0x80 | n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(0x80 | 126));
    append_big_endian<2>(out, n);
  } else {
    out.push_back(static_cast<char>(0x80 | 127));
    append_big_endian<8>(out, n);
  }
  unsigned char key[4];
  std::memcpy(key, &mask, sizeof key);
  out.append(reinterpret_cast<const char*>(key), sizeof key);

  // Masked eight bytes at a time: the key repeats every four, so two copies of it make a word.
  const std::size_t start = out.size();
  out.resize(start + n);
  char* dst = &out[start];
  const char* src = payload.data();
  std::uint64_t word_key;
  std::memcpy(&word_key, key, 4);
  std::memcpy(reinterpret_cast<char*>(&word_key) + 4, key, 4);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, src + i, 8);
    word ^= word_key;
    std::memcpy(dst + i, &word, 8);
  }
  for (; i < n; ++i) dst[i] = static_cast<char>(src[i] ^ static_cast<char>(key[i % 4]));
}

bool read_ws_frame_head(std::string_view bytes, WsFrameHead& out) {
  if (bytes.size() < 2) return false;
  const auto b0 = static_cast<unsigned char>(bytes[0]);
  const auto b1 = static_cast<unsigned char>(bytes[1]);
  const bool masked = b1 & 0x80;
  const std::size_t length_bytes = (b1 & 0x7F) == 126 ? 2 : (b1 & 0x7F) == 127 ? 8 : 0;
  const std::size_t header = 2 + length_bytes + (masked ? 4 : 0);
  if (bytes.size() < header) return false;
  std::uint64_t length = length_bytes == 0 ? (b1 & 0x7F) : 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    length = (length << 8) | static_cast<unsigned char>(bytes[2 + i]);
  out.fin = b0 & 0x80;
  out.rsv = (b0 >> 4) & 0x07;
  out.opcode = b0 & 0x0F;
  out.masked = masked;
  out.header = header;
  out.length = length;
  return true;
}

}  // namespace polybus::quickio
