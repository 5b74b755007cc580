// SPDX-License-Identifier: Apache-2.0
#include "polybus/figg/codec.hpp"

#include "polybus/error.hpp"
#include "polybus/text/big_endian.hpp"

#include <algorithm>
#include <cstring>

namespace polybus::figg {
namespace {

void put16(std::string& out, std::uint16_t v) {
  append_big_endian<2>(out, v);
}
void put32(std::string& out, std::uint32_t v) {
  append_big_endian<4>(out, v);
}
void put64(std::string& out, std::uint64_t v) {
  append_big_endian<8>(out, v);
}
void header(std::string& out, MessageType type, std::size_t payload_size) {
  // type (2), version (2), payload size (4): one append
  append_big_endian<8>(out, std::uint64_t{static_cast<std::uint16_t>(type)} << 48 |
                                std::uint64_t{kProtocolVersion} << 32 |
                                static_cast<std::uint32_t>(payload_size));
}
void bytes(std::string& out, std::string_view field) {
  put32(out, static_cast<std::uint32_t>(field.size()));
  out.append(field);
}

// PUBLISH and DATA: the frame header, the topic with its length, a sequence number or offset and
// the data's length, written in place after one resize (a publish's hottest bytes).
void append_topic_record_header(std::string& out, MessageType type, std::string_view topic,
                                std::uint64_t number, std::size_t data_size) {
  const std::size_t start = out.size();
  out.resize(start + 8 + 4 + topic.size() + 8 + 4);
  char* at = &out[start];
  store_big_endian<2>(at, static_cast<std::uint16_t>(type));
  store_big_endian<2>(at + 2, kProtocolVersion);
  store_big_endian<4>(at + 4, static_cast<std::uint32_t>(4 + topic.size() + 8 + 4 + data_size));
  store_big_endian<4>(at + 8, static_cast<std::uint32_t>(topic.size()));
  at += 12;
  if (!topic.empty()) std::memcpy(at, topic.data(), topic.size());
  at += topic.size();
  store_big_endian<8>(at, number);
  store_big_endian<4>(at + 8, static_cast<std::uint32_t>(data_size));
}

// Reads fields off a payload, bounded by it.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool u16(std::uint16_t& v) { return fixed<2>(v); }
  bool u64(std::uint64_t& v) { return fixed<8>(v); }
  bool field(std::string_view& v) {
    std::uint64_t size = 0;
    if (!fixed<4>(size) || size > in_.size()) return false;
    v = in_.substr(0, size);
    in_.remove_prefix(size);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  template <std::size_t Width, typename T>
  bool fixed(T& v) {
    if (in_.size() < Width) return false;
    v = static_cast<T>(read_big_endian<Width>(in_.data()));
    in_.remove_prefix(Width);
    return true;
  }
  std::string_view in_;
};

std::error_code finish(const Reader& r) {
  return r.done() ? std::error_code{} : make_error_code(errc::trailing_bytes);
}
std::error_code check_topic(std::string_view topic) {
  return topic.empty() || topic.size() > kMaxTopicLength ? make_error_code(errc::invalid_topic)
                                                         : std::error_code{};
}

}  // namespace

void append_attach(std::string& out, std::string_view topic, bool from_offset,
                   std::uint64_t offset) {
  header(out, MessageType::attach, 2 + 4 + topic.size() + 8);
  put16(out, from_offset ? kAttachFromOffset : 0);
  bytes(out, topic);
  put64(out, from_offset ? offset : 0);  // always present; the server reads it either way
}
void append_detach(std::string& out, std::string_view topic) {
  header(out, MessageType::detach, 4 + topic.size());
  bytes(out, topic);
}
void append_publish_header(std::string& out, std::string_view topic, std::uint64_t seq,
                           std::size_t data_size) {
  append_topic_record_header(out, MessageType::publish, topic, seq, data_size);
}
void append_ping(std::string& out, std::uint64_t timestamp) {
  header(out, MessageType::ping, 8);
  put64(out, timestamp);
}
void append_attached(std::string& out, std::string_view topic, std::uint64_t offset) {
  header(out, MessageType::attached, 4 + topic.size() + 8);
  bytes(out, topic);
  put64(out, offset);
}
void append_detached(std::string& out, std::string_view topic) {
  header(out, MessageType::detached, 4 + topic.size());
  bytes(out, topic);
}
void append_ack(std::string& out, std::uint64_t seq) {
  header(out, MessageType::ack, 8);
  put64(out, seq);
}
void append_data_header(std::string& out, std::string_view topic, std::uint64_t offset,
                        std::size_t data_size) {
  append_topic_record_header(out, MessageType::data, topic, offset, data_size);
}
void append_pong(std::string& out, std::uint64_t timestamp) {
  header(out, MessageType::pong, 8);
  put64(out, timestamp);
}

FrameParser::FrameParser(std::size_t max_payload) : max_payload_(max_payload) {}

void FrameParser::reset() {
  header_filled_ = 0;
  buffer_.clear();
  error_ = {};
}

FrameParser::Result FrameParser::feed(std::string_view input, Frame& frame) {
  Result result;
  if (error_) return result.error = error_, result;
  // A whole frame at the start of the input, nothing held from an earlier read: read in place,
  // its header not copied. Anything else (a split frame, one too large) goes the long way.
  if (header_filled_ == 0 && input.size() >= kHeaderSize) {
    const auto size = static_cast<std::uint32_t>(read_big_endian<4>(input.data() + 4));
    if (size <= max_payload_ && input.size() - kHeaderSize >= size) {
      size_ = size;
      frame.type = static_cast<MessageType>(read_big_endian<2>(input.data()));
      frame.version = static_cast<std::uint16_t>(read_big_endian<2>(input.data() + 2));
      frame.payload = input.substr(kHeaderSize, size);
      frame.in_parser_buffer = false;
      result.consumed = kHeaderSize + size;
      result.has_frame = true;
      return result;
    }
  }
  if (header_filled_ < kHeaderSize) {
    std::size_t take = std::min(kHeaderSize - header_filled_, input.size());
    std::memcpy(header_ + header_filled_, input.data(), take);
    header_filled_ += take;
    input.remove_prefix(take);
    result.consumed = take;
    if (header_filled_ < kHeaderSize) return result;
    size_ = static_cast<std::uint32_t>(read_big_endian<4>(header_ + 4));
    if (size_ > max_payload_) {
      error_ = make_error_code(errc::frame_too_large);
      result.error = error_;
      return result;
    }
    buffer_.clear();
  }
  std::size_t needed = size_ - buffer_.size();
  auto complete = [&](std::string_view payload, bool buffered) {
    frame.type = static_cast<MessageType>(read_big_endian<2>(header_));
    frame.version = static_cast<std::uint16_t>(read_big_endian<2>(header_ + 2));
    frame.payload = payload;
    frame.in_parser_buffer = buffered;
    header_filled_ = 0;
    result.has_frame = true;
  };
  if (buffer_.empty() && input.size() >= needed) {
    complete(input.substr(0, needed), false);
    result.consumed += needed;
    return result;
  }
  std::size_t take = std::min(needed, input.size());
  buffer_.append(input.substr(0, take));
  result.consumed += take;
  if (buffer_.size() == size_) complete(buffer_, true);
  return result;
}

std::error_code parse_attach(std::string_view payload, Attach& out) {
  Reader r(payload);
  std::uint16_t flags = 0;
  Attach a;
  if (!r.u16(flags) || !r.field(a.topic) || !r.u64(a.offset))
    return make_error_code(errc::truncated_field);
  if (auto ec = check_topic(a.topic)) return ec;
  a.from_offset = (flags & kAttachFromOffset) != 0;
  if (auto ec = finish(r)) return ec;
  out = a;
  return {};
}

std::error_code parse_topic(std::string_view payload, std::string_view& topic) {
  Reader r(payload);
  std::string_view t;
  if (!r.field(t)) return make_error_code(errc::truncated_field);
  if (auto ec = check_topic(t)) return ec;
  if (auto ec = finish(r)) return ec;
  topic = t;
  return {};
}

std::error_code parse_attached(std::string_view payload, TopicOffset& out) {
  Reader r(payload);
  TopicOffset a;
  if (!r.field(a.topic) || !r.u64(a.offset)) return make_error_code(errc::truncated_field);
  if (auto ec = finish(r)) return ec;
  out = a;
  return {};
}

std::error_code parse_publish(std::string_view payload, Publish& out) {
  Reader r(payload);
  Publish p;
  if (!r.field(p.topic) || !r.u64(p.seq) || !r.field(p.data))
    return make_error_code(errc::truncated_field);
  if (auto ec = check_topic(p.topic)) return ec;
  if (auto ec = finish(r)) return ec;
  out = p;
  return {};
}

std::error_code parse_data(std::string_view payload, Data& out) {
  Reader r(payload);
  Data d;
  if (!r.field(d.topic) || !r.u64(d.offset) || !r.field(d.data))
    return make_error_code(errc::truncated_field);
  if (auto ec = finish(r)) return ec;
  out = d;
  return {};
}

std::error_code parse_u64(std::string_view payload, std::uint64_t& out) {
  Reader r(payload);
  std::uint64_t v = 0;
  if (!r.u64(v)) return make_error_code(errc::truncated_field);
  if (auto ec = finish(r)) return ec;
  out = v;
  return {};
}

}  // namespace polybus::figg
