// SPDX-License-Identifier: Apache-2.0
#include "polybus/nsq/codec.hpp"

#include "polybus/text/big_endian.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace polybus::nsq {
namespace {

// ---------------------------------------------------------------------------------------------
// Byte helpers

void append_u32(std::string& out, std::uint32_t value) {
  append_big_endian<4>(out, value);
}

template <typename Integer>
void append_decimal(std::string& out, Integer value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

// Two's complement reinterpretation without relying on implementation-defined conversions.
std::int64_t as_signed(std::uint64_t value, std::size_t bits) noexcept {
  const std::uint64_t sign_bit = std::uint64_t{1} << (bits - 1);
  if ((value & sign_bit) == 0) return static_cast<std::int64_t>(value);
  // Two's complement negation of the low `bits` bits.
  const std::uint64_t magnitude = ((~value) & ((sign_bit << 1) - 1)) + 1;
  if (magnitude == (std::uint64_t{1} << 63)) return std::numeric_limits<std::int64_t>::min();
  return -static_cast<std::int64_t>(magnitude);
}

// ---------------------------------------------------------------------------------------------
// Argument checks shared by the encoders

// nsqd 1.3's name characters, a-z A-Z 0-9 . _ -, as a table: a publish checks its topic's every
// character, and one load per character costs less than the six compares of the rule.
constexpr std::array<bool, 256> kNameChars = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c)
    table[static_cast<std::size_t>(c)] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  return table;
}();

bool is_name_char(char c) noexcept {
  return kNameChars[static_cast<unsigned char>(c)];
}

bool valid_name(std::string_view name) noexcept {
  constexpr std::string_view kEphemeralSuffix = "#ephemeral";
  if (name.empty() || name.size() > kMaxNameLength) return false;
  std::string_view base = name;
  if (base.size() >= kEphemeralSuffix.size() &&
      base.substr(base.size() - kEphemeralSuffix.size()) == kEphemeralSuffix) {
    base.remove_suffix(kEphemeralSuffix.size());
  }
  return !base.empty() && std::all_of(base.begin(), base.end(), is_name_char);
}

// Whether any of the eight bytes of `word` is outside '!'..'~' (a space, a control byte, DEL or a
// byte of 0x80 and above). Below: b - 0x21 sets a byte's top bit, where b's own is clear, only
// when b < 0x21; a borrow into the next byte starts only at such a byte. Above: (b & 0x7f) + 1
// sets the top bit only for 0x7f and 0xff and never carries out of the byte, and b's own top bit
// marks the rest of 0x80 and above.
bool outside_printable(std::uint64_t word) noexcept {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kTops = 0x8080808080808080ULL;
  const std::uint64_t below = (word - 0x21 * kOnes) & ~word & kTops;
  const std::uint64_t above = (((word & ~kTops) + kOnes) | word) & kTops;
  return (below | above) != 0;
}

// An id goes back to nsqd in FIN, REQ and TOUCH for every message: its 16 bytes are checked as
// two words, not byte by byte.
std::error_code check_message_id(std::string_view id) noexcept {
  static_assert(kMessageIdSize == 16, "checked as two 8-byte words");
  if (id.size() != kMessageIdSize) return errc::invalid_message_id;
  std::uint64_t first, second;
  std::memcpy(&first, id.data(), 8);
  std::memcpy(&second, id.data() + 8, 8);
  if (outside_printable(first) || outside_printable(second)) return errc::invalid_message_id;
  return {};
}

// nsqd rejects empty bodies and reads sizes as int32.
std::error_code check_body_size(std::size_t size) noexcept {
  if (size == 0) return errc::empty_body;
  if (size > kMaxWireSize) return errc::body_too_large;
  return {};
}

// Checks an MPUB batch and computes its body size (count + every size prefix and body).
template <typename Bodies>
std::error_code mpub_body_size(std::string_view topic, const Bodies& bodies,
                               std::size_t& body_size) noexcept {
  if (!valid_topic_name(topic)) return errc::invalid_name;
  if (bodies.empty()) return errc::empty_body;
  std::size_t total = 4;
  for (const auto& body : bodies) {
    if (body.empty()) return errc::empty_body;
    // Compare before adding so that the sum cannot wrap.
    if (body.size() > kMaxWireSize || total + 4 > kMaxWireSize - body.size()) {
      return errc::body_too_large;
    }
    total += 4 + body.size();
  }
  body_size = total;
  return {};
}

void append_mpub_header_unchecked(std::string& out, std::string_view topic, std::size_t body_size,
                                  std::size_t count) {
  out += "MPUB ";
  out += topic;
  out += '\n';
  append_u32(out, static_cast<std::uint32_t>(body_size));
  append_u32(out, static_cast<std::uint32_t>(count));
}

template <typename Bodies>
std::error_code append_mpub_impl(std::string& out, std::string_view topic, const Bodies& bodies) {
  std::size_t body_size = 0;
  if (auto error = mpub_body_size(topic, bodies, body_size)) return error;
  out.reserve(out.size() + topic.size() + 6 + 4 + body_size);
  append_mpub_header_unchecked(out, topic, body_size, bodies.size());
  for (const auto& body : bodies) {
    append_u32(out, static_cast<std::uint32_t>(body.size()));
    out.append(body.data(), body.size());
  }
  return {};
}

std::error_code append_sized_command(std::string& out, std::string_view command_line,
                                     std::string_view body) {
  if (auto error = check_body_size(body.size())) return error;
  out += command_line;
  append_u32(out, static_cast<std::uint32_t>(body.size()));
  out += body;
  return {};
}

// ---------------------------------------------------------------------------------------------
// Server error codes

struct ServerErrorCode {
  std::string_view text;
  errc code;
};

constexpr ServerErrorCode kServerErrorCodes[] = {
    {"E_INVALID", errc::e_invalid},
    {"E_BAD_BODY", errc::e_bad_body},
    {"E_BAD_TOPIC", errc::e_bad_topic},
    {"E_BAD_CHANNEL", errc::e_bad_channel},
    {"E_BAD_MESSAGE", errc::e_bad_message},
    {"E_PUB_FAILED", errc::e_pub_failed},
    {"E_MPUB_FAILED", errc::e_mpub_failed},
    {"E_DPUB_FAILED", errc::e_dpub_failed},
    {"E_FIN_FAILED", errc::e_fin_failed},
    {"E_REQ_FAILED", errc::e_req_failed},
    {"E_TOUCH_FAILED", errc::e_touch_failed},
    {"E_SUB_FAILED", errc::e_sub_failed},
    {"E_IDENTIFY_FAILED", errc::e_identify_failed},
    {"E_AUTH_FAILED", errc::e_auth_failed},
    {"E_AUTH_ERROR", errc::e_auth_error},
    {"E_AUTH_FIRST", errc::e_auth_first},
    {"E_AUTH_DISABLED", errc::e_auth_disabled},
    {"E_UNAUTHORIZED", errc::e_unauthorized},
};

// ---------------------------------------------------------------------------------------------
// JSON reading. Iterative parsing keeps deeply nested hostile input off the call stack; UTF-8 is
// validated so that strings handed on (host names, versions) are well-formed.

constexpr unsigned kJsonParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// nsqd's and nsqlookupd's JSON is flat (three levels at most); deeper is not theirs. Checked
// before parsing, so a deep document costs neither a DOM nor a recursive walk.
constexpr std::size_t kMaxJsonDepth = 64;

bool nested_deeper_than(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return true;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

std::error_code parse_json(std::string_view text, rapidjson::Document& document) {
  if (nested_deeper_than(text, kMaxJsonDepth)) return errc::invalid_json;
  document.Parse<kJsonParseFlags>(text.data(), text.size());
  if (document.HasParseError()) return errc::invalid_json;
  return {};
}

// Field readers: a missing field leaves `out` alone; a present one of the wrong type fails.
// RapidJSON 1.1.0 decodes a lone low surrogate escape (\udc00-\udfff) into the bytes ED B0..BF
// xx, which are not UTF-8 (found by the nsq_json fuzzer); raw input is validated while parsing,
// so that is the only way a decoded string can be ill-formed.
bool has_encoded_surrogate(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i)
    if (static_cast<unsigned char>(text[i]) == 0xed &&
        static_cast<unsigned char>(text[i + 1]) >= 0xa0)
      return true;
  return false;
}

bool read_field(const rapidjson::Value& object, const char* name, std::string& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd()) return true;
  if (!member->value.IsString()) return false;
  std::string_view text(member->value.GetString(), member->value.GetStringLength());
  if (has_encoded_surrogate(text)) return false;
  out.assign(text);
  return true;
}

bool read_field(const rapidjson::Value& object, const char* name, bool& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd()) return true;
  if (!member->value.IsBool()) return false;
  out = member->value.GetBool();
  return true;
}

bool read_field(const rapidjson::Value& object, const char* name, std::int64_t& out,
                std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd()) return true;
  if (!member->value.IsInt64()) return false;
  const std::int64_t value = member->value.GetInt64();
  if (value < min || value > max) return false;
  out = value;
  return true;
}

bool read_field(const rapidjson::Value& object, const char* name, int& out) {
  std::int64_t value = out;
  if (!read_field(object, name, value, std::numeric_limits<int>::min(),
                  std::numeric_limits<int>::max())) {
    return false;
  }
  out = static_cast<int>(value);
  return true;
}

bool read_port(const rapidjson::Value& object, const char* name, std::int64_t min,
               std::uint16_t& out) {
  std::int64_t value = out;
  if (!read_field(object, name, value, min, 65535)) return false;
  out = static_cast<std::uint16_t>(value);
  return true;
}

std::error_code parse_producer(const rapidjson::Value& entry, LookupProducer& out) {
  if (!entry.IsObject()) return errc::invalid_lookup_response;
  const bool ok = read_field(entry, "broadcast_address", out.broadcast_address) &&
                  read_field(entry, "hostname", out.hostname) &&
                  read_field(entry, "remote_address", out.remote_address) &&
                  read_field(entry, "version", out.version) && entry.HasMember("tcp_port") &&
                  read_port(entry, "tcp_port", 1, out.tcp_port) &&
                  read_port(entry, "http_port", 0, out.http_port);
  if (!ok || out.broadcast_address.empty()) return errc::invalid_lookup_response;
  return {};
}

bool is_string_equal(const rapidjson::Value& object, const char* name, std::string_view expected) {
  const auto member = object.FindMember(name);
  return member != object.MemberEnd() && member->value.IsString() &&
         std::string_view(member->value.GetString(), member->value.GetStringLength()) == expected;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names

bool valid_topic_name(std::string_view name) noexcept {
  return valid_name(name);
}
bool valid_channel_name(std::string_view name) noexcept {
  return valid_name(name);
}

// ---------------------------------------------------------------------------------------------
// Command encoders

void append_magic(std::string& out) {
  out += kMagicV2;
}

std::error_code append_identify(std::string& out, std::string_view json) {
  return append_sized_command(out, "IDENTIFY\n", json);
}

std::error_code append_auth(std::string& out, std::string_view secret) {
  return append_sized_command(out, "AUTH\n", secret);
}

std::error_code append_sub(std::string& out, std::string_view topic, std::string_view channel) {
  if (!valid_topic_name(topic) || !valid_channel_name(channel)) return errc::invalid_name;
  out += "SUB ";
  out += topic;
  out += ' ';
  out += channel;
  out += '\n';
  return {};
}

void append_rdy(std::string& out, std::uint32_t count) {
  out += "RDY ";
  append_decimal(out, count);
  out += '\n';
}

std::error_code append_fin(std::string& out, std::string_view message_id) {
  if (auto error = check_message_id(message_id)) return error;
  out += "FIN ";
  out += message_id;
  out += '\n';
  return {};
}

std::error_code append_req(std::string& out, std::string_view message_id, std::uint32_t delay_ms) {
  if (auto error = check_message_id(message_id)) return error;
  out += "REQ ";
  out += message_id;
  out += ' ';
  append_decimal(out, delay_ms);
  out += '\n';
  return {};
}

std::error_code append_touch(std::string& out, std::string_view message_id) {
  if (auto error = check_message_id(message_id)) return error;
  out += "TOUCH ";
  out += message_id;
  out += '\n';
  return {};
}

void append_cls(std::string& out) {
  out += "CLS\n";
}
void append_nop(std::string& out) {
  out += "NOP\n";
}

std::error_code append_pub_header(std::string& out, std::string_view topic, std::size_t body_size) {
  if (!valid_topic_name(topic)) return errc::invalid_name;
  if (auto error = check_body_size(body_size)) return error;
  out += "PUB ";
  out += topic;
  out += '\n';
  append_u32(out, static_cast<std::uint32_t>(body_size));
  return {};
}

std::error_code append_pub(std::string& out, std::string_view topic, std::string_view body) {
  if (auto error = append_pub_header(out, topic, body.size())) return error;
  out += body;
  return {};
}

std::error_code append_dpub_header(std::string& out, std::string_view topic, std::uint32_t defer_ms,
                                   std::size_t body_size) {
  if (!valid_topic_name(topic)) return errc::invalid_name;
  if (auto error = check_body_size(body_size)) return error;
  out += "DPUB ";
  out += topic;
  out += ' ';
  append_decimal(out, defer_ms);
  out += '\n';
  append_u32(out, static_cast<std::uint32_t>(body_size));
  return {};
}

std::error_code append_dpub(std::string& out, std::string_view topic, std::uint32_t defer_ms,
                            std::string_view body) {
  if (auto error = append_dpub_header(out, topic, defer_ms, body.size())) return error;
  out += body;
  return {};
}

std::error_code append_mpub(std::string& out, std::string_view topic,
                            const std::vector<std::string>& bodies) {
  return append_mpub_impl(out, topic, bodies);
}

std::error_code append_mpub(std::string& out, std::string_view topic,
                            const std::vector<std::string_view>& bodies) {
  return append_mpub_impl(out, topic, bodies);
}

std::error_code append_mpub_header(std::string& out, std::string_view topic,
                                   const std::vector<std::string_view>& bodies) {
  std::size_t body_size = 0;
  if (auto error = mpub_body_size(topic, bodies, body_size)) return error;
  append_mpub_header_unchecked(out, topic, body_size, bodies.size());
  return {};
}

void append_size_prefix(std::string& out, std::uint32_t size) {
  append_u32(out, size);
}

std::error_code mpub_gather(std::string_view topic, const std::vector<std::string_view>& bodies,
                            std::string& scratch, std::vector<std::string_view>& pieces) {
  std::size_t body_size = 0;
  if (auto error = mpub_body_size(topic, bodies, body_size)) return error;
  // Reuses the caller's capacity; views are taken only once scratch has its final size.
  scratch.clear();
  append_mpub_header_unchecked(scratch, topic, body_size, bodies.size());
  const std::size_t header_size = scratch.size();
  for (const auto& body : bodies) append_u32(scratch, static_cast<std::uint32_t>(body.size()));

  pieces.clear();
  pieces.reserve(1 + 2 * bodies.size());
  pieces.emplace_back(scratch.data(), header_size);
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    pieces.emplace_back(scratch.data() + header_size + 4 * i, 4);
    pieces.push_back(bodies[i]);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Frame parser

FrameParser::FrameParser(std::size_t max_frame_size) : max_frame_size_(max_frame_size) {}

void FrameParser::reset() noexcept {
  header_filled_ = 0;
  body_size_ = 0;
  body_filled_ = 0;
  buffer_.reset();
  buffer_capacity_ = 0;
  error_.clear();
}

FrameParser::Result FrameParser::fail(std::error_code error, std::size_t consumed) noexcept {
  error_ = error;
  Result result;
  result.consumed = consumed;
  result.error = error;
  return result;
}

std::int64_t FrameParser::declared_size() const noexcept {
  return as_signed(read_big_endian<4>(header_), 32);
}

std::error_code FrameParser::check_size_field() const noexcept {
  const std::int64_t size = as_signed(read_big_endian<4>(header_), 32);
  if (size < static_cast<std::int64_t>(kFrameTypeSize)) return errc::bad_frame_size;
  if (static_cast<std::uint64_t>(size) > max_frame_size_) return errc::frame_too_large;
  return {};
}

// Called once the 8-byte header is complete and its size field checked.
std::error_code FrameParser::start_body() noexcept {
  const std::int64_t type = as_signed(read_big_endian<4>(header_ + 4), 32);
  if (type < 0 || type > static_cast<std::int64_t>(FrameType::message)) {
    return errc::unknown_frame_type;
  }
  type_ = static_cast<FrameType>(type);
  body_size_ = static_cast<std::size_t>(read_big_endian<4>(header_)) - kFrameTypeSize;
  if (type_ == FrameType::message && body_size_ < kMessageHeaderSize) {
    return errc::truncated_message;
  }
  body_filled_ = 0;
  return {};
}

FrameParser::Result FrameParser::feed(std::string_view input, Frame& frame) noexcept {
  if (error_) return fail(error_, 0);
  if (input.empty()) return {};
  std::size_t used = 0;

  if (header_filled_ < kFrameHeaderSize) {
    const std::size_t take = std::min(kFrameHeaderSize - header_filled_, input.size());
    std::memcpy(header_ + header_filled_, input.data(), take);
    header_filled_ += take;
    used += take;
    // Reject a hostile size as soon as its 4 bytes are known, before anything is buffered.
    if (header_filled_ >= 4) {
      if (auto error = check_size_field()) return fail(error, used);
    }
    if (header_filled_ < kFrameHeaderSize) return {used, false, {}};
    if (auto error = start_body()) return fail(error, used);
  }

  const std::string_view rest = input.substr(used);
  if (body_filled_ == 0 && rest.size() >= body_size_) {
    // The whole body is in this chunk: hand out a view, no copy.
    frame.type = type_;
    frame.body = rest.substr(0, body_size_);
    frame.in_parser_buffer = false;
    used += body_size_;
  } else {
    // The body spans chunks: copy what arrived. Nothing is allocated until body bytes do arrive.
    if (rest.empty()) return {used, false, {}};
    if (body_filled_ == 0 && buffer_capacity_ < body_size_) {
      // Exact size, old buffer released first: never more than max_frame_size held at once.
      buffer_.reset();
      buffer_capacity_ = 0;
      buffer_.reset(new (std::nothrow) char[body_size_]);
      if (!buffer_) return fail(std::make_error_code(std::errc::not_enough_memory), used);
      buffer_capacity_ = body_size_;
    }
    const std::size_t take = std::min(body_size_ - body_filled_, rest.size());
    std::memcpy(buffer_.get() + body_filled_, rest.data(), take);
    body_filled_ += take;
    used += take;
    if (body_filled_ < body_size_) return {used, false, {}};
    frame.type = type_;
    frame.body = std::string_view(buffer_.get(), body_size_);
    frame.in_parser_buffer = true;
  }
  header_filled_ = 0;
  body_filled_ = 0;
  return {used, true, {}};
}

// ---------------------------------------------------------------------------------------------
// Messages

std::error_code parse_message(std::string_view frame_body, MessageView& out) noexcept {
  if (frame_body.size() < kMessageHeaderSize) return errc::truncated_message;
  out.timestamp_ns = as_signed(read_big_endian<8>(frame_body.data()), 64);
  out.attempts = static_cast<std::uint16_t>(read_big_endian<2>(frame_body.data() + 8));
  out.id = frame_body.substr(10, kMessageIdSize);
  out.body = frame_body.substr(kMessageHeaderSize);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Error frames

bool is_fatal_server_error(errc code) noexcept {
  return code != errc::e_fin_failed && code != errc::e_req_failed && code != errc::e_touch_failed;
}

ServerError parse_server_error(std::string_view error_body) noexcept {
  ServerError error;
  const std::size_t space = error_body.find(' ');
  error.code_text = error_body.substr(0, space);
  if (space != std::string_view::npos) error.description = error_body.substr(space + 1);
  for (const auto& known : kServerErrorCodes) {
    if (known.text == error.code_text) {
      error.code = known.code;
      break;
    }
  }
  error.fatal = is_fatal_server_error(error.code);
  return error;
}

// ---------------------------------------------------------------------------------------------
// IDENTIFY

std::string IdentifyRequest::to_json() const {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  const auto write_string = [&writer](const char* key, const std::string& value) {
    if (value.empty()) return;
    writer.Key(key);
    writer.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  };
  const auto write_flag = [&writer](const char* key, bool value) {
    if (!value) return;
    writer.Key(key);
    writer.Bool(true);
  };
  const auto write_number = [&writer](const char* key, const auto& value) {
    if (!value) return;
    writer.Key(key);
    writer.Int64(*value);
  };

  writer.StartObject();
  write_string("client_id", client_id);
  write_string("hostname", hostname);
  write_string("user_agent", user_agent);
  writer.Key("feature_negotiation");
  writer.Bool(feature_negotiation);
  write_number("heartbeat_interval", heartbeat_interval);
  write_number("output_buffer_size", output_buffer_size);
  write_number("output_buffer_timeout", output_buffer_timeout);
  write_flag("tls_v1", tls_v1);
  write_flag("snappy", snappy);
  write_flag("deflate", deflate);
  write_number("deflate_level", deflate_level);
  write_number("sample_rate", sample_rate);
  write_number("msg_timeout", msg_timeout);
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::error_code parse_identify_response(std::string_view body, IdentifyResponse& out) {
  if (body == kOkBody) {
    out = IdentifyResponse{};
    return {};
  }
  rapidjson::Document document;
  if (auto error = parse_json(body, document)) return error;
  if (!document.IsObject()) return errc::invalid_identify_response;

  IdentifyResponse response;
  response.negotiated = true;
  const bool ok = read_field(document, "max_rdy_count", response.max_rdy_count, 0) &&
                  read_field(document, "version", response.version) &&
                  read_field(document, "max_msg_timeout", response.max_msg_timeout, 0) &&
                  read_field(document, "msg_timeout", response.msg_timeout, 0) &&
                  read_field(document, "tls_v1", response.tls_v1) &&
                  read_field(document, "deflate", response.deflate) &&
                  read_field(document, "deflate_level", response.deflate_level) &&
                  read_field(document, "max_deflate_level", response.max_deflate_level) &&
                  read_field(document, "snappy", response.snappy) &&
                  read_field(document, "sample_rate", response.sample_rate) &&
                  read_field(document, "auth_required", response.auth_required) &&
                  read_field(document, "output_buffer_size", response.output_buffer_size) &&
                  read_field(document, "output_buffer_timeout", response.output_buffer_timeout) &&
                  read_field(document, "topology_region", response.topology_region) &&
                  read_field(document, "topology_zone", response.topology_zone);
  if (!ok) return errc::invalid_identify_response;
  out = std::move(response);
  return {};
}

// ---------------------------------------------------------------------------------------------
// AUTH

std::error_code parse_auth_response(std::string_view body, AuthResponse& out) {
  rapidjson::Document document;
  if (auto error = parse_json(body, document)) return error;
  if (!document.IsObject()) return errc::invalid_auth_response;
  AuthResponse response;
  const bool ok = read_field(document, "identity", response.identity) &&
                  read_field(document, "identity_url", response.identity_url) &&
                  read_field(document, "permission_count", response.permission_count, 0);
  if (!ok) return errc::invalid_auth_response;
  out = std::move(response);
  return {};
}

// ---------------------------------------------------------------------------------------------
// nsqlookupd

std::error_code parse_lookup_response(std::string_view json, std::vector<LookupProducer>& out,
                                      std::size_t* rejected) {
  rapidjson::Document document;
  if (auto error = parse_json(json, document)) return error;
  if (!document.IsObject()) return errc::invalid_lookup_response;

  const rapidjson::Value* payload = &document;
  if (document.HasMember("status_code")) {
    // Old nsqlookupd: {"status_code":200,"status_txt":"OK","data":{...}}.
    const auto& status = document.FindMember("status_code")->value;
    if (!status.IsInt64()) return errc::invalid_lookup_response;
    if (status.GetInt64() != 200) {
      return is_string_equal(document, "status_txt", "TOPIC_NOT_FOUND")
                 ? errc::lookup_topic_not_found
                 : errc::lookup_failed;
    }
    const auto data = document.FindMember("data");
    if (data == document.MemberEnd() || !data->value.IsObject()) {
      return errc::invalid_lookup_response;
    }
    payload = &data->value;
  } else if (is_string_equal(document, "message", "TOPIC_NOT_FOUND")) {
    // nsqlookupd 1.x answers an unknown topic with 404 and this body.
    return errc::lookup_topic_not_found;
  }

  const auto producers = payload->FindMember("producers");
  if (producers == payload->MemberEnd() || !producers->value.IsArray()) {
    return errc::invalid_lookup_response;
  }
  std::vector<LookupProducer> parsed;
  parsed.reserve(producers->value.Size());
  std::size_t bad = 0;
  std::error_code first_error;
  for (const auto& entry : producers->value.GetArray()) {
    LookupProducer producer;
    if (auto error = parse_producer(entry, producer)) {
      ++bad;
      if (!first_error) first_error = error;
      continue;
    }
    parsed.push_back(std::move(producer));
  }
  if (rejected) *rejected = bad;
  if (parsed.empty() && bad > 0) return first_error;
  out = std::move(parsed);
  return {};
}

}  // namespace polybus::nsq
