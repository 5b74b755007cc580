// SPDX-License-Identifier: Apache-2.0
// Sans-IO codec for QuickIO 0.2.1 (its client architecture document, and the real server's
// behaviour, docs/quickio.md): the event text `<path>:<callback id>=<json>`, the
// callback bodies, the raw TCP framing (8-byte big-endian length + event text) and the
// newline-separated bodies of HTTP long polling. Shared by the client and the in-process server.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::quickio {

enum class codec_errc {
  malformed_event = 1,      // no ':' or no '=' where the event text needs them
  invalid_path,             // empty, not starting with '/', or a character outside [A-Za-z0-9_/-]
  invalid_callback_id,      // not a decimal uint64 (empty, sign, other character, overflow)
  invalid_json,             // the data is not one well-formed JSON value
  frame_too_large,          // a raw frame length over the decoder's bound
  malformed_frame,          // a raw frame that cannot be decoded (e.g. an empty event)
  invalid_utf8,             // text that must be UTF-8 and is not
  malformed_callback_body,  // a callback body that is not {"code":<int>,"data":X[,"err_msg":S]}
};
POLYBUS_API const std::error_category& codec_category() noexcept;
POLYBUS_API std::error_code make_error_code(codec_errc e) noexcept;

inline constexpr std::string_view kHandshake = "/qio/ohai";
inline constexpr std::size_t kRawLengthSize = 8;
inline constexpr std::string_view kCallbackPrefix = "/qio/callback/";

// ---- events ----
// Nesting depth accepted in any JSON read from the wire (the budget's max_json_depth default):
// deeper input is refused, so nothing downstream (a re-serialisation, a user's own recursive
// walk) can be driven off the stack.
inline constexpr std::size_t kDefaultMaxJsonDepth = 64;
struct POLYBUS_API Event {
  std::string_view path;          // views into the text parsed
  std::uint64_t callback_id = 0;  // 0: no callback requested
  std::string_view json;
};

// Strict `<path>:<id>=<json>`. The path is split at the first ':', the id at the first '=' after
// it. On error, when `why` is given, it receives a sentence naming what was wrong (the error
// code's message is generic).
// `max_json_depth` bounds the nesting of the data (the budget's max_json_depth).
POLYBUS_API std::error_code parse_event(std::string_view text, Event& out,
                                        std::string* why = nullptr,
                                        std::size_t max_json_depth = kDefaultMaxJsonDepth);
POLYBUS_API void append_event(std::string& out, std::string_view path, std::uint64_t callback_id,
                              std::string_view json);
POLYBUS_API std::string make_event(std::string_view path, std::uint64_t callback_id,
                                   std::string_view json);

// As the document says clients do: keep only [A-Za-z0-9_/-], a leading '/', repeated slashes
// collapsed, a trailing '/' dropped ("" and "/" both give "/").
POLYBUS_API std::string clean_path(std::string_view path);
// clean_path would return it unchanged: checked without building a copy.
POLYBUS_API bool is_clean_path(std::string_view path);
// Already clean and non-empty (what parse_event accepts): starts with '/', only [A-Za-z0-9_/-].
POLYBUS_API bool is_valid_path(std::string_view path);

// ---- JSON ----
// Exactly one well-formed value, whitespace around, nested at most max_depth deep.
POLYBUS_API bool is_valid_json(std::string_view json, std::size_t max_depth = kDefaultMaxJsonDepth);
POLYBUS_API bool json_unquote(std::string_view json,
                              std::string& out);  // true when json is a string

// ---- callbacks ----
// The id N of "/qio/callback/N" (decimal, no overflow, not 0); nullopt for any other path.
POLYBUS_API std::optional<std::uint64_t> callback_path_id(std::string_view path);
POLYBUS_API std::string callback_path(std::uint64_t id);  // "/qio/callback/<id>"

struct POLYBUS_API CallbackBody {
  int code = 0;
  std::string data_json;  // "null" when the body has no data
  std::string err_msg;
};
POLYBUS_API std::error_code parse_callback_body(std::string_view json, CallbackBody& out,
                                                std::string* why = nullptr,
                                                std::size_t max_depth = kDefaultMaxJsonDepth);
// {"code":200,"data":X} when err_msg is empty, else {"code":N,"data":X,"err_msg":"..."}.
// An empty data_json is written as null.
POLYBUS_API std::string make_callback_body(int code, std::string_view data_json,
                                           std::string_view err_msg = {});

// ---- raw TCP framing ----
POLYBUS_API void append_raw_frame(std::string& out, std::string_view event);
// Only the 8-byte length, for a gather write of (header, event).
POLYBUS_API void append_raw_frame_header(std::string& out, std::size_t event_size);

// Incremental and bounded: a length over max_frame_size is frame_too_large before anything is
// buffered; a frame wholly inside one input is returned as a view of that input (no copy); only
// frames split across inputs are assembled in an internal buffer. After an error every call
// returns that error until reset().
class POLYBUS_API RawFrameDecoder {
 public:
  explicit RawFrameDecoder(std::size_t max_frame_size);

  struct Result {
    std::size_t consumed = 0;  // bytes of input used
    bool has_frame = false;    // frame is set; valid until the next parse/feed/reset
    std::error_code error;
  };
  // Parse loop, as Beast's basic_parser::put: call again with input.substr(consumed) until
  // consumed is 0 or the input is used up.
  Result parse(std::string_view input, std::string_view& frame);

  // Every complete frame of input, in order, to on_frame(std::string_view). Stops at the first
  // error, which it returns.
  template <typename OnFrame>
  std::error_code feed(std::string_view input, OnFrame&& on_frame) {
    while (!input.empty()) {
      std::string_view frame;
      Result r = parse(input, frame);
      if (r.error) return r.error;
      input.remove_prefix(r.consumed);
      if (r.has_frame) on_frame(frame);
      if (r.consumed == 0 && !r.has_frame) break;
    }
    return error_;
  }
  void reset();
  std::size_t max_frame_size() const { return max_; }
  // The length the last complete length field declared (what frame_too_large refused).
  std::uint64_t declared_size() const { return size_; }
  // Part of a frame (its length or some of its body) is held: the frame has begun.
  bool partial() const { return length_filled_ > 0 || buffering_; }

 private:
  std::size_t max_;
  unsigned char length_[kRawLengthSize] = {};
  std::size_t length_filled_ = 0;
  std::uint64_t size_ = 0;
  std::string buffer_;
  bool buffering_ = false;
  std::error_code error_;
};

// ---- WebSocket ----
// One client-to-server text frame of RFC 6455 (FIN set, masked with the 4 bytes of mask in
// memory order, the shortest length form), without checking that the text is UTF-8: the
// client's events are (their paths are clean, their data checked JSON).
POLYBUS_API void append_masked_text_frame(std::string& out, std::string_view payload,
                                          std::uint32_t mask);

// The header of one WebSocket frame (RFC 6455 5.2), as read from the front of the bytes.
struct POLYBUS_API WsFrameHead {
  bool fin = false;
  unsigned rsv = 0;  // the three reserved bits: 0 without an extension
  int opcode = 0;
  bool masked = false;
  std::size_t header = 0;    // the header's bytes, the mask key included
  std::uint64_t length = 0;  // the payload's bytes after the header, as the frame says
  // All a server sends but its pings and close: a whole, unmasked text message.
  bool plain_text() const { return fin && rsv == 0 && opcode == 1 && !masked; }
};
// False while bytes hold less than the whole header. Any length form is read (a peer may use a
// longer one than needed); the caller bounds the length.
POLYBUS_API bool read_ws_frame_head(std::string_view bytes, WsFrameHead& out);

// ---- HTTP long polling bodies ----
// Calls fn(std::string_view line) for each '\n'-separated line; a trailing empty line (the body
// ending in '\n', or an empty body) is not a line.
template <typename Fn>
void for_each_line(std::string_view body, Fn&& fn) {
  while (!body.empty()) {
    std::size_t nl = body.find('\n');
    if (nl == std::string_view::npos) {
      fn(body);
      return;
    }
    fn(body.substr(0, nl));
    body.remove_prefix(nl + 1);
  }
}

}  // namespace polybus::quickio

template <>
struct std::is_error_code_enum<polybus::quickio::codec_errc> : std::true_type {};
