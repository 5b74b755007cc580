// SPDX-License-Identifier: Apache-2.0
// Errors of the NSQ codec: what the parser rejects in bytes from the wire, what the encoders refuse
// to put on it, and one code per error nsqd itself sends in an error frame.
#pragma once

#include "polybus/export.hpp"

#include <system_error>

namespace polybus::nsq {

enum class errc {
  // Framing (FrameParser, parse_message).
  bad_frame_size = 1,  // the signed 32-bit size field is negative or below the 4-byte frame type
  frame_too_large,     // the size field is over the parser's max_frame_size
  unknown_frame_type,  // frame type other than response (0), error (1), message (2)
  truncated_message,   // message frame shorter than its 26-byte header

  // JSON payloads (IDENTIFY and AUTH responses, nsqlookupd /lookup).
  invalid_json,               // not well-formed JSON
  invalid_identify_response,  // well-formed, but a field has the wrong type or range
  invalid_auth_response,
  invalid_lookup_response,
  lookup_topic_not_found,  // nsqlookupd does not know the topic
  lookup_failed,           // the old wrapped form carried a status_code other than 200

  // Arguments the encoders refuse, because nsqd would reject them or they would corrupt the stream.
  invalid_name,        // topic or channel name outside 1-64 of [.a-zA-Z0-9_-] (+ "#ephemeral")
  invalid_message_id,  // not 16 printable, non-space ASCII bytes
  body_too_large,      // a size that does not fit the signed 32-bit size field
  empty_body,          // nsqd rejects empty bodies (and MPUB batches with no message)

  // Error frames sent by nsqd ("E_CODE description").
  e_invalid,
  e_bad_body,
  e_bad_topic,
  e_bad_channel,
  e_bad_message,
  e_pub_failed,
  e_mpub_failed,
  e_dpub_failed,
  e_fin_failed,
  e_req_failed,
  e_touch_failed,
  e_sub_failed,
  e_identify_failed,
  e_auth_failed,
  e_auth_error,
  e_auth_first,
  e_auth_disabled,
  e_unauthorized,
  unknown_server_error,  // an error frame whose code this codec does not know
};

POLYBUS_API const std::error_category& nsq_category() noexcept;

POLYBUS_API std::error_code make_error_code(errc e) noexcept;

}  // namespace polybus::nsq

template <>
struct std::is_error_code_enum<polybus::nsq::errc> : std::true_type {};
