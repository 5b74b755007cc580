// SPDX-License-Identifier: Apache-2.0
#include "polybus/memodb/sp.hpp"

#include <algorithm>
#include <cstdio>

#include "polybus/memodb/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::memodb::sp {
namespace {

const char* name(std::uint16_t protocol) {
  switch (protocol) {
    case static_cast<std::uint16_t>(Protocol::req0):
      return "req0";
    case static_cast<std::uint16_t>(Protocol::rep0):
      return "rep0";
  }
  return nullptr;
}

std::uint32_t read32(std::string_view bytes) {
  return static_cast<std::uint32_t>(read_big_endian<4>(bytes.data()));
}

}  // namespace

std::string connection_header(Protocol self) {
  const auto p = static_cast<std::uint16_t>(self);
  return std::string{'\0', 'S', 'P', '\0', static_cast<char>(p >> 8), static_cast<char>(p & 0xff),
                     '\0', '\0'};
}

std::error_code check_connection_header(std::string_view bytes, Protocol peer, std::string* why) {
  auto fail = [&](std::string text) {
    if (why) *why = std::move(text);
    return make_error_code(errc::sp_bad_header);
  };
  if (bytes.size() != kHeaderSize)
    return fail("the SP header is " + std::to_string(bytes.size()) + " bytes, not 8");
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (b[0] != 0 || b[1] != 'S' || b[2] != 'P' || b[3] != 0 || b[6] != 0 || b[7] != 0)
    return fail("the peer's first 8 bytes are not an SP header (is it an NNG/SP endpoint?)");
  const std::uint16_t got = static_cast<std::uint16_t>((b[4] << 8) | b[5]);
  if (got != static_cast<std::uint16_t>(peer)) {
    char number[8];
    std::snprintf(number, sizeof number, "0x%04x", got);
    return fail(std::string("the peer speaks SP protocol ") + (name(got) ? name(got) : number) +
                ", not " + name(static_cast<std::uint16_t>(peer)));
  }
  return {};
}

std::string frame_prefix(Carrier carrier, std::uint64_t length) {
  std::string prefix;
  if (carrier == Carrier::ipc) prefix.push_back('\x01');
  append_big_endian<8>(prefix, length);
  return prefix;
}

FrameDecoder::FrameDecoder(Carrier carrier, std::size_t max_message)
    : carrier_(carrier), max_message_(max_message) {}

std::size_t FrameDecoder::feed(std::string_view in, std::error_code& ec, std::string* why) {
  ec.clear();
  if (failed_) {
    ec = make_error_code(errc::sp_bad_frame);
    if (why) *why = "the SP stream failed earlier";
    return 0;
  }
  std::size_t used = 0;
  while (!ready_ && used < in.size()) {
    if (!in_body_) {
      const std::size_t prefix_size = carrier_ == Carrier::ipc ? 9 : 8;
      const std::size_t n = std::min(prefix_size - prefix_got_, in.size() - used);
      std::copy_n(in.data() + used, n, prefix_ + prefix_got_);
      prefix_got_ += n;
      used += n;
      if (prefix_got_ < prefix_size) break;
      const unsigned char* length_bytes = prefix_;
      if (carrier_ == Carrier::ipc) {
        if (prefix_[0] != 1) {
          failed_ = true;
          ec = make_error_code(errc::sp_bad_frame);
          if (why) *why = "SP IPC message type " + std::to_string(prefix_[0]) + ", not 1";
          return used;
        }
        ++length_bytes;
      }
      const std::uint64_t length = read_big_endian<8>(reinterpret_cast<const char*>(length_bytes));
      if (length > max_message_) {
        failed_ = true;
        ec = make_error_code(errc::sp_message_too_large);
        if (why)
          *why = "SP message of " + std::to_string(length) + " bytes, over the limit of " +
                 std::to_string(max_message_);
        return used;
      }
      prefix_got_ = 0;
      in_body_ = true;
      body_.assign(static_cast<std::size_t>(length), '\0');
      body_got_ = 0;
    }
    const std::size_t n = std::min(body_.size() - body_got_, in.size() - used);
    std::copy_n(in.data() + used, n, body_.data() + body_got_);
    body_got_ += n;
    used += n;
    if (body_got_ == body_.size()) {
      in_body_ = false;
      ready_ = true;
    }
  }
  return used;
}

std::string FrameDecoder::take() {
  ready_ = false;
  body_got_ = 0;
  std::string message = std::move(body_);
  body_.clear();
  return message;
}

std::string encode_request_id(std::uint32_t id) {
  std::string bytes;
  append_big_endian<4>(bytes, id);
  return bytes;
}

std::optional<std::uint32_t> split_reply(std::string_view reply, std::string_view& rest) {
  if (reply.size() < 4) return std::nullopt;
  const std::uint32_t id = read32(reply);
  if ((id & 0x80000000u) == 0) return std::nullopt;
  rest = reply.substr(4);
  return id;
}

std::error_code split_request(std::string_view request, std::string_view& backtrace,
                              std::string_view& body, bool& hops_exceeded) {
  hops_exceeded = false;
  std::size_t end = 0;
  for (int hops = 1;; ++hops) {
    if (hops > kMaxHops) {
      hops_exceeded = true;
      return {};
    }
    if (request.size() - end < 4) return make_error_code(errc::sp_no_backtrace);
    const bool last = (static_cast<unsigned char>(request[end]) & 0x80u) != 0;
    end += 4;
    if (last) break;
  }
  backtrace = request.substr(0, end);
  body = request.substr(end);
  return {};
}

}  // namespace polybus::memodb::sp
