// SPDX-License-Identifier: Apache-2.0
// Sans-IO codec for Figg's binary protocol (the client protocol document of
// github.com/andydunstall/figg, and the real server's details, docs/figg.md): an 8-byte
// big-endian header (uint16 type, uint16 version, uint32 payload size) and payloads of
// fixed-size integers and uint32-length-prefixed byte fields. Both directions are here, so the
// in-process broker shares it.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::figg {

enum class errc {
  frame_too_large = 1,  // payload size over the configured maximum
  truncated_field,      // a field runs past the end of its payload
  trailing_bytes,       // bytes left after the last field
  unknown_type,         // a message type the receiver does not handle
  invalid_topic,        // empty topic, or one over the maximum length
};
POLYBUS_API const std::error_category& figg_category() noexcept;
POLYBUS_API std::error_code make_error_code(errc e) noexcept;

enum class MessageType : std::uint16_t {
  attach = 1,
  attached = 2,
  detach = 3,
  detached = 4,
  publish = 5,
  ack = 6,
  data = 7,
  ping = 8,  // newer servers only
  pong = 9,
};

inline constexpr std::uint16_t kProtocolVersion = 1;
inline constexpr std::size_t kHeaderSize = 8;
// The real server reads "from offset" only from the most significant bit.
inline constexpr std::uint16_t kAttachFromOffset = 0x8000;
inline constexpr std::size_t kMaxTopicLength = 1024;

// ---- encoders (append to out) ----
POLYBUS_API void append_attach(std::string& out, std::string_view topic, bool from_offset,
                               std::uint64_t offset);
POLYBUS_API void append_detach(std::string& out, std::string_view topic);
// Everything of PUBLISH but the data bytes, for a gather write of (header, data).
// A PUBLISH header's size before its topic: frame header (8), topic length (4), sequence
// number (8), payload length (4).
inline constexpr std::size_t kPublishHeaderBase = 8 + 4 + 8 + 4;
POLYBUS_API void append_publish_header(std::string& out, std::string_view topic, std::uint64_t seq,
                                       std::size_t data_size);
POLYBUS_API void append_ping(std::string& out, std::uint64_t timestamp);
// Server side.
POLYBUS_API void append_attached(std::string& out, std::string_view topic, std::uint64_t offset);
POLYBUS_API void append_detached(std::string& out, std::string_view topic);
POLYBUS_API void append_ack(std::string& out, std::uint64_t seq);
POLYBUS_API void append_data_header(std::string& out, std::string_view topic, std::uint64_t offset,
                                    std::size_t data_size);
POLYBUS_API void append_pong(std::string& out, std::uint64_t timestamp);

// ---- frames ----
struct POLYBUS_API Frame {
  MessageType type;
  std::uint16_t version;
  std::string_view payload;
  bool in_parser_buffer;  // as nsq::Frame: true when the payload was split across feeds
};

// Incremental, bounded: the size is checked before any payload is buffered; a payload wholly
// inside the fed bytes is returned as a view of them; only split payloads are copied.
class POLYBUS_API FrameParser {
 public:
  explicit FrameParser(std::size_t max_payload);
  struct Result {
    std::size_t consumed = 0;
    bool has_frame = false;
    std::error_code error;
  };
  Result feed(std::string_view input, Frame& frame);
  void reset();
  // True between frames: no partial frame is held.
  bool idle() const { return header_filled_ == 0 && !error_; }
  std::size_t max_payload() const { return max_payload_; }
  // The payload size the last complete header declared (what frame_too_large refused).
  std::uint32_t declared_size() const { return size_; }

 private:
  std::size_t max_payload_;
  char header_[kHeaderSize] = {};
  std::size_t header_filled_ = 0;
  std::uint32_t size_ = 0;
  std::string buffer_;
  std::error_code error_;
};

// ---- payloads ----
struct POLYBUS_API Attach {
  bool from_offset = false;
  std::string_view topic;
  std::uint64_t offset = 0;
};
struct TopicOffset {  // ATTACHED
  std::string_view topic;
  std::uint64_t offset = 0;
};
struct POLYBUS_API Publish {
  std::string_view topic;
  std::uint64_t seq = 0;
  std::string_view data;
};
struct POLYBUS_API Data {
  std::string_view topic;
  std::uint64_t offset = 0;
  std::string_view data;
};

POLYBUS_API std::error_code parse_attach(std::string_view payload, Attach& out);
POLYBUS_API std::error_code parse_topic(std::string_view payload,
                                        std::string_view& topic);  // DETACH(ED)
POLYBUS_API std::error_code parse_attached(std::string_view payload, TopicOffset& out);
POLYBUS_API std::error_code parse_publish(std::string_view payload, Publish& out);
POLYBUS_API std::error_code parse_data(std::string_view payload, Data& out);
POLYBUS_API std::error_code parse_u64(std::string_view payload,
                                      std::uint64_t& out);  // ACK, PING, PONG

}  // namespace polybus::figg

template <>
struct std::is_error_code_enum<polybus::figg::errc> : std::true_type {};
