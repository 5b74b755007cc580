// SPDX-License-Identifier: Apache-2.0
// Sans-IO codec for the NSQ V2 TCP protocol as spoken by nsqd 1.3: command encoders, a frame
// parser, and parsers for the JSON payloads (IDENTIFY, AUTH, nsqlookupd /lookup). Nothing here
// touches a socket, a clock or a thread; the adapter owns the I/O.
//
// Encoders append to a caller-owned std::string so that several commands can be batched into one
// write. An encoder that can fail checks every argument first and leaves `out` untouched when it
// returns an error, so a refused command never leaves half a line on the wire.
//
// Parse functions return a std::error_code and never throw on bad input. Sizes read from the wire
// are never trusted: the frame parser rejects a frame by its size field before buffering any of it
// and never allocates more than max_frame_size bytes. Output arguments are only written on success.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "polybus/nsq/error.hpp"

namespace polybus::nsq {

// ---------------------------------------------------------------------------------------------
// Wire constants

inline constexpr std::string_view kMagicV2 = "  V2";
inline constexpr std::size_t kFrameHeaderSize = 8;     // int32 size + int32 frame type
inline constexpr std::size_t kFrameTypeSize = 4;       // counted in the size field
inline constexpr std::size_t kMessageIdSize = 16;      // hex characters
inline constexpr std::size_t kMessageHeaderSize = 26;  // int64 ns timestamp + uint16 attempts + id
inline constexpr std::size_t kMaxNameLength = 64;
// Sizes on the wire are signed 32-bit integers (nsqd reads them as int32).
inline constexpr std::size_t kMaxWireSize = 0x7fffffff;
// nsqd's default --max-msg-size (1 MiB) carried in a message frame: the size field counts the frame
// type, the message header and the body.
inline constexpr std::size_t kDefaultMaxFrameSize = 1048576 + kFrameTypeSize + kMessageHeaderSize;

inline constexpr std::string_view kHeartbeatBody = "_heartbeat_";
inline constexpr std::string_view kOkBody = "OK";
inline constexpr std::string_view kCloseWaitBody = "CLOSE_WAIT";

// ---------------------------------------------------------------------------------------------
// Names

// nsqd 1.3 accepts 1-64 characters of [.a-zA-Z0-9_-], optionally ending in "#ephemeral" (the
// suffix counts toward the 64). Topics and channels follow the same rule.
POLYBUS_API bool valid_topic_name(std::string_view name) noexcept;
POLYBUS_API bool valid_channel_name(std::string_view name) noexcept;

// ---------------------------------------------------------------------------------------------
// Command encoders

// "  V2", sent once right after connecting.
POLYBUS_API void append_magic(std::string& out);

// "IDENTIFY\n" [size] [json]. `json` is usually IdentifyRequest::to_json(). Errors: empty_body,
// body_too_large.
POLYBUS_API std::error_code append_identify(std::string& out, std::string_view json);

// "AUTH\n" [size] [secret]. Errors: empty_body, body_too_large.
POLYBUS_API std::error_code append_auth(std::string& out, std::string_view secret);

// "SUB <topic> <channel>\n". Errors: invalid_name.
POLYBUS_API std::error_code append_sub(std::string& out, std::string_view topic,
                                       std::string_view channel);

// "RDY <count>\n". The upper bound is the negotiated IdentifyResponse::max_rdy_count, which the
// caller enforces (nsqd closes the connection when it is exceeded).
POLYBUS_API void append_rdy(std::string& out, std::uint32_t count);

// "FIN <id>\n", "REQ <id> <delay_ms>\n", "TOUCH <id>\n". Errors: invalid_message_id (the id must
// be the 16 bytes nsqd sent, see MessageView::id). nsqd bounds REQ's delay by its
// --max-req-timeout (1 h by default) and closes the connection beyond it.
POLYBUS_API std::error_code append_fin(std::string& out, std::string_view message_id);
POLYBUS_API std::error_code append_req(std::string& out, std::string_view message_id,
                                       std::uint32_t delay_ms);
POLYBUS_API std::error_code append_touch(std::string& out, std::string_view message_id);

// "CLS\n" (nsqd answers CLOSE_WAIT) and "NOP\n" (the answer to a heartbeat).
POLYBUS_API void append_cls(std::string& out);
POLYBUS_API void append_nop(std::string& out);

// "PUB <topic>\n" [size] [body]. Errors: invalid_name, empty_body, body_too_large.
POLYBUS_API std::error_code append_pub(std::string& out, std::string_view topic,
                                       std::string_view body);
// Everything of PUB except the body bytes, for a gather write of (out, body).
POLYBUS_API std::error_code append_pub_header(std::string& out, std::string_view topic,
                                              std::size_t body_size);

// "DPUB <topic> <defer_ms>\n" [size] [body]. nsqd bounds defer_ms by --max-req-timeout.
// Errors as for PUB.
POLYBUS_API std::error_code append_dpub(std::string& out, std::string_view topic,
                                        std::uint32_t defer_ms, std::string_view body);
POLYBUS_API std::error_code append_dpub_header(std::string& out, std::string_view topic,
                                               std::uint32_t defer_ms, std::size_t body_size);

// "MPUB <topic>\n" [body size] [count] ([size] [body])... where body size counts the 4-byte count
// and every size prefix. Errors: invalid_name, empty_body (no bodies, or an empty one),
// body_too_large (the whole MPUB body over kMaxWireSize).
POLYBUS_API std::error_code append_mpub(std::string& out, std::string_view topic,
                                        const std::vector<std::string>& bodies);
POLYBUS_API std::error_code append_mpub(std::string& out, std::string_view topic,
                                        const std::vector<std::string_view>& bodies);

// Zero-copy MPUB. append_mpub_header writes "MPUB <topic>\n" [body size] [count] after checking all
// of `bodies` as append_mpub does; append_size_prefix writes one body's 4-byte size. A gather write
// sends: header, then for each body its prefix and the body itself.
POLYBUS_API std::error_code append_mpub_header(std::string& out, std::string_view topic,
                                               const std::vector<std::string_view>& bodies);
POLYBUS_API void append_size_prefix(std::string& out, std::uint32_t size);

// The same, laid out ready for a gather write (e.g. a vector of asio::const_buffer): `scratch` is
// overwritten with the header and every size prefix (its capacity is reused), and `pieces` with
// the views to send in order: header, prefix 1, body 1, prefix 2, body 2, ... The bodies are not
// copied. The views stay valid while `scratch` is not modified and the bodies live. Errors as
// append_mpub; on error neither argument is touched.
POLYBUS_API std::error_code mpub_gather(std::string_view topic,
                                        const std::vector<std::string_view>& bodies,
                                        std::string& scratch,
                                        std::vector<std::string_view>& pieces);

// ---------------------------------------------------------------------------------------------
// Frames

enum class FrameType : std::int32_t { response = 0, error = 1, message = 2 };

struct POLYBUS_API Frame {
  FrameType type = FrameType::response;
  std::string_view body;  // without the size and type fields; see FrameParser for its lifetime
  // True when `body` views the parser's own buffer (the body arrived split over several feeds) and
  // is overwritten by later frames; false when it views the input passed to feed(), which the
  // caller may keep alive (e.g. a reference-counted read chunk) to use the body without a copy.
  bool in_parser_buffer = false;
};

// Incremental frame parser in the style of Beast's basic_parser: the caller feeds whatever bytes
// arrived, in chunks of any size including one byte, and gets complete frames out, one per call.
//
//   while (!input.empty()) {
//     Frame frame;
//     auto result = parser.feed(input, frame);
//     if (result.error) return close_connection(result.error);
//     input.remove_prefix(result.consumed);
//     if (result.has_frame) handle(frame);
//   }
//
// Design (bounded memory, copy only when a frame is split):
//  * The 8-byte header is always collected in a fixed array inside the parser, so a header split
//    over any number of reads costs nothing.
//  * The size field is checked as soon as its 4 bytes are in: negative or < 4 gives
//    bad_frame_size, > max_frame_size gives frame_too_large, before a byte of body is buffered.
//    The type is checked as soon as it is in (unknown_frame_type), and a message frame whose body
//    cannot hold the 26-byte message header gives truncated_message.
//  * When the whole body is in the chunk being fed, Frame::body is a view into that chunk (no
//    copy). Only a body that spans chunks is copied, into the parser's buffer (then
//    Frame::in_parser_buffer is set). That buffer is allocated at the frame's exact size (never
//    above max_frame_size), only once body bytes arrive, and reused for later frames.
//
// Lifetime: with Frame::in_parser_buffer set, Frame::body is valid until the next feed() or
// reset(); otherwise it views the input given to feed() and lives as long as that does.
//
// Each call either consumes at least one byte of non-empty input, produces a frame, or fails.
// Errors are sticky: once feed() fails it consumes nothing and returns the same error until
// reset(); the stream is unusable after a framing error and the connection should be closed.
class POLYBUS_API FrameParser {
 public:
  struct Result {
    std::size_t consumed = 0;  // bytes of `input` used; advance past them
    bool has_frame = false;    // `frame` holds a complete frame
    std::error_code error;
  };

  // `max_frame_size` bounds the size field, which counts the 4-byte frame type plus the body.
  explicit FrameParser(std::size_t max_frame_size = kDefaultMaxFrameSize);

  Result feed(std::string_view input, Frame& frame) noexcept;

  // True between frames: no partial frame is held, so end of stream here is clean.
  bool idle() const noexcept { return header_filled_ == 0 && !error_; }

  // Forgets any partial frame and a sticky error, and releases the body buffer.
  void reset() noexcept;

  std::size_t max_frame_size() const noexcept { return max_frame_size_; }
  // The size field of the last complete header (what bad_frame_size or frame_too_large refused).
  std::int64_t declared_size() const noexcept;
  // Bytes currently allocated for split bodies; never above max_frame_size().
  std::size_t buffer_capacity() const noexcept { return buffer_capacity_; }

 private:
  std::error_code check_size_field() const noexcept;
  std::error_code start_body() noexcept;
  Result fail(std::error_code error, std::size_t consumed) noexcept;

  std::size_t max_frame_size_;
  char header_[kFrameHeaderSize] = {};
  std::size_t header_filled_ = 0;
  FrameType type_ = FrameType::response;
  std::size_t body_size_ = 0;
  std::size_t body_filled_ = 0;  // bytes of a split body copied into buffer_
  std::unique_ptr<char[]> buffer_;
  std::size_t buffer_capacity_ = 0;
  std::error_code error_;
};

// Response-frame bodies with a fixed meaning.
inline bool is_heartbeat(std::string_view response_body) noexcept {
  return response_body == kHeartbeatBody;
}
inline bool is_ok(std::string_view response_body) noexcept {
  return response_body == kOkBody;
}
inline bool is_close_wait(std::string_view response_body) noexcept {
  return response_body == kCloseWaitBody;
}
inline bool is_heartbeat(const Frame& frame) noexcept {
  return frame.type == FrameType::response && is_heartbeat(frame.body);
}

// ---------------------------------------------------------------------------------------------
// Messages

// A message frame's body, viewed in place; valid as long as the frame body it came from.
struct POLYBUS_API MessageView {
  std::int64_t timestamp_ns = 0;  // when nsqd received the message, ns since the Unix epoch
  std::uint16_t attempts = 0;     // deliveries so far, this one included
  std::string_view id;            // 16 bytes (hex); pass to append_fin/req/touch
  std::string_view body;
};

// Errors: truncated_message when shorter than kMessageHeaderSize.
POLYBUS_API std::error_code parse_message(std::string_view frame_body, MessageView& out) noexcept;

// ---------------------------------------------------------------------------------------------
// Error frames

// An error frame's body is "<E_CODE> <description>"; the views point into that body.
struct POLYBUS_API ServerError {
  errc code = errc::unknown_server_error;
  std::string_view code_text;    // e.g. "E_FIN_FAILED"
  std::string_view description;  // the rest, possibly empty
  bool fatal = true;             // nsqd closes the connection after sending it
};

// Never fails: an unknown code gives errc::unknown_server_error, taken as fatal.
POLYBUS_API ServerError parse_server_error(std::string_view error_body) noexcept;

// nsqd keeps the connection after E_FIN_FAILED, E_REQ_FAILED and E_TOUCH_FAILED (typically a
// message that already timed out) and closes it after every other error.
POLYBUS_API bool is_fatal_server_error(errc code) noexcept;

// ---------------------------------------------------------------------------------------------
// IDENTIFY

// Unset optional fields, empty strings and false flags are left out of the JSON so that nsqd
// applies its own defaults; feature_negotiation is always sent.
struct POLYBUS_API IdentifyRequest {
  std::string client_id;
  std::string hostname;
  std::string user_agent;
  bool feature_negotiation = true;
  std::optional<std::int64_t> heartbeat_interval;     // ms; -1 disables heartbeats
  std::optional<std::int64_t> output_buffer_size;     // bytes; -1 disables buffering
  std::optional<std::int64_t> output_buffer_timeout;  // ms; -1 disables the timeout
  bool tls_v1 = false;
  bool snappy = false;
  bool deflate = false;
  std::optional<int> deflate_level;         // 1-9
  std::optional<int> sample_rate;           // percent, 0-99
  std::optional<std::int64_t> msg_timeout;  // ms

  // Compact JSON, strings escaped for JSON (quotes, backslashes, control characters).
  std::string to_json() const;
};

// What nsqd agreed to. The defaults are nsqd 1.3's, and are what a plain "OK" (no feature
// negotiation) leaves in place.
struct POLYBUS_API IdentifyResponse {
  bool negotiated = false;  // true when nsqd answered with JSON rather than "OK"
  std::int64_t max_rdy_count = 2500;
  std::string version;
  std::int64_t max_msg_timeout = 900000;  // ms
  std::int64_t msg_timeout = 60000;       // ms
  bool tls_v1 = false;                    // start TLS now; nsqd then sends OK over it
  bool deflate = false;                   // then switch to deflate; nsqd sends OK through it
  int deflate_level = 0;
  int max_deflate_level = 6;
  bool snappy = false;  // as deflate
  int sample_rate = 0;
  bool auth_required = false;                // send AUTH before anything else
  std::int64_t output_buffer_size = 16384;   // bytes
  std::int64_t output_buffer_timeout = 250;  // ms
  std::string topology_region;
  std::string topology_zone;
};

// Accepts "OK" or nsqd's JSON object; unknown fields are ignored. Errors: invalid_json;
// invalid_identify_response for a non-object, a field of the wrong JSON type, or a negative
// max_rdy_count, msg_timeout or max_msg_timeout.
POLYBUS_API std::error_code parse_identify_response(std::string_view body, IdentifyResponse& out);

// ---------------------------------------------------------------------------------------------
// AUTH

struct POLYBUS_API AuthResponse {
  std::string identity;
  std::string identity_url;
  std::int64_t permission_count = 0;
};

// Errors: invalid_json; invalid_auth_response for a non-object, a wrongly typed field or a negative
// permission_count. Missing fields keep their defaults.
POLYBUS_API std::error_code parse_auth_response(std::string_view body, AuthResponse& out);

// ---------------------------------------------------------------------------------------------
// nsqlookupd

struct POLYBUS_API LookupProducer {
  std::string broadcast_address;  // connect to broadcast_address:tcp_port
  std::string hostname;
  std::string remote_address;
  std::string version;
  std::uint16_t tcp_port = 0;
  std::uint16_t http_port = 0;
};

// Parses the body of GET /lookup?topic=T in the nsqlookupd 1.x form {"channels":[...],
// "producers":[...]} or the old {"status_code":200,"status_txt":"OK","data":{...}}. Each producer
// needs a non-empty broadcast_address and a tcp_port in 1-65535; http_port, if present, must be in
// 0-65535. `out` is replaced on success. Errors: invalid_json; lookup_topic_not_found for
// {"message":"TOPIC_NOT_FOUND"} (or the wrapped equivalent); lookup_failed for another wrapped
// status; invalid_lookup_response for a missing producers array, or when every entry of a
// non-empty one is malformed. Malformed entries among good ones are skipped and counted in
// `rejected` (if given), so one bad producer does not hide the good ones.
POLYBUS_API std::error_code parse_lookup_response(std::string_view json,
                                                  std::vector<LookupProducer>& out,
                                                  std::size_t* rejected = nullptr);

}  // namespace polybus::nsq
