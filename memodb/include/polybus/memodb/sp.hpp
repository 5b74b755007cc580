// SPDX-License-Identifier: Apache-2.0
// Sans-IO codec for NNG's scalability protocol (SP) as memo01 travels on it: the connection
// header, message framing over TCP and IPC, and the request IDs (backtraces) of req0/rep0. Bytes
// in, messages out; no sockets, no NNG. The in-process broker speaks it (libnng 1.5.2 can stall
// a whole process, docs/memodb.md), and so can a client.
//
//   header   each side first sends {0x00, 'S', 'P', 0x00, protocol (16 bits, big-endian), 0, 0};
//            req0 is 0x30, rep0 0x31, and each accepts only the other.
//   TCP      every message: its length (64 bits, big-endian), then its bytes.
//   IPC      the same after a message-type byte, always 1.
//   req0     a request's bytes start with its 32-bit request ID, top bit set; the reply starts
//            with the same ID.
//   rep0     a request's backtrace is the 4-byte words up to the first with its top bit set (one
//            word, the request ID, from a directly connected req0; more through devices). The
//            reply carries the backtrace back in front.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::memodb::sp {

enum class Protocol : std::uint16_t { req0 = 0x30, rep0 = 0x31 };
enum class Carrier : std::uint8_t { tcp, ipc };

inline constexpr std::size_t kHeaderSize = 8;
// rep0's default: a request that has crossed more devices than this is dropped.
inline constexpr int kMaxHops = 8;

// The 8 bytes a side sends first.
POLYBUS_API std::string connection_header(Protocol self);
// Checks the peer's 8 bytes: memodb::errc::sp_bad_header if they are not an SP header or name
// another protocol than `peer`; `why` (if given) says which.
POLYBUS_API std::error_code check_connection_header(std::string_view bytes, Protocol peer,
                                                    std::string* why = nullptr);

// What goes in front of a message of `length` bytes: 8 bytes (TCP) or 9 (IPC).
POLYBUS_API std::string frame_prefix(Carrier carrier, std::uint64_t length);

// Splits a stream into messages. Each message's bytes are collected in one string (the only
// copy), handed out whole; a length over max_message is refused before anything is allocated
// for it. After an error the decoder stays failed: the connection is to be closed.
class POLYBUS_API FrameDecoder {
 public:
  FrameDecoder(Carrier carrier, std::size_t max_message);

  // Takes bytes from `in`, as many as fit the message under way, and returns how many it took.
  // When a message is complete, `message` holds it and `ready()` is true until take() moves it
  // out; feed() takes nothing more while one is ready. An error: the prefix's type byte is not
  // 1 (sp_bad_frame) or its length is over max_message (sp_message_too_large); `why` says the
  // value and the limit.
  std::size_t feed(std::string_view in, std::error_code& ec, std::string* why = nullptr);
  bool ready() const { return ready_; }
  std::string take();
  // Whether part of a message has arrived and the rest has not (for a frame_timeout).
  bool mid_message() const { return !ready_ && (prefix_got_ > 0 || in_body_); }

 private:
  Carrier carrier_;
  std::size_t max_message_;
  unsigned char prefix_[9] = {};
  std::size_t prefix_got_ = 0;
  std::string body_;
  std::size_t body_got_ = 0;
  bool in_body_ = false;
  bool ready_ = false;
  bool failed_ = false;
};

// ---- req0 ----
// A request ID as req0 sends it: the top bit set.
inline std::uint32_t request_id(std::uint32_t counter) {
  return counter | 0x80000000u;
}
// The 4 bytes of `id` (big-endian), for the front of a request.
POLYBUS_API std::string encode_request_id(std::uint32_t id);
// A reply's request ID and what follows it; nullopt when the reply is shorter than 4 bytes or
// its first word lacks the top bit (rep0 would never send that).
POLYBUS_API std::optional<std::uint32_t> split_reply(std::string_view reply,
                                                     std::string_view& rest);

// ---- rep0 ----
// Splits a request into its backtrace and its body. sp_no_backtrace when the bytes end before a
// word with the top bit (rep0 closes such a connection); `hops_exceeded` is set (and no error)
// when the backtrace is longer than kMaxHops words (rep0 drops such a request silently).
POLYBUS_API std::error_code split_request(std::string_view request, std::string_view& backtrace,
                                          std::string_view& body, bool& hops_exceeded);

}  // namespace polybus::memodb::sp
