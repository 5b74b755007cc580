// SPDX-License-Identifier: Apache-2.0
// CloudEvents 1.0 in structured JSON mode: the envelope that carries headers on brokers whose
// messages have none (envelope=cloudevents). Sans-IO: text in, text out. The client uses it on
// every publish and delivery when the envelope is on; applications may use it to read or write
// envelopes themselves.
//
// Mapping. A header whose name is a context attribute (id, source, type, time, subject,
// dataschema, datacontenttype) sets that attribute; any other header is an extension attribute
// and its name must follow the CloudEvents rules (a-z and 0-9, 1 to 20 characters). The payload
// becomes `data`: the JSON value itself when datacontenttype is JSON (application/json, text/json
// or a +json suffix, and no white space around it), a JSON string for text (text/*, or no type
// and valid UTF-8), else `data_base64`, so that every payload reads back byte for byte. Reading
// reverses it: the payload is the JSON text of `data`, the string's text, or the decoded
// `data_base64`; every attribute but the data becomes a header, specversion too.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "polybus/headers.hpp"

namespace polybus::cloudevents {

inline constexpr std::string_view kSpecVersion = "1.0";
inline constexpr std::size_t kMaxNameLength = 20;
// Attributes one envelope may carry; more is not a valid envelope (a bound on what the wire makes
// a receiver hold).
inline constexpr std::size_t kMaxAttributes = 64;

// Why `name` cannot be a header in an envelope (reserved, bad characters, too long); empty when
// it can.
POLYBUS_API std::string check_header_name(std::string_view name);

// The required attributes a publish does not set through its headers.
struct POLYBUS_API Defaults {
  std::string_view id;
  std::string_view source;
  std::string_view type;
  std::string_view time;  // RFC 3339; empty: no time attribute
};

// Appends the envelope of `payload` to `out`. On a caller error (a bad header name or value,
// a JSON content type over a payload that is not JSON) appends nothing and returns what was
// wrong; empty on success.
POLYBUS_API std::string encode(std::string_view payload, const Headers& headers,
                               const Defaults& defaults, std::size_t max_json_depth,
                               std::string& out);

// One envelope read back. `payload` points into the text decoded or into `storage`.
struct POLYBUS_API Event {
  std::string_view payload;
  std::string storage;
  Headers headers;
};

// Reads one envelope. Returns why `json` is not a valid CloudEvents 1.0 structured event (with the
// byte offset where that was found), or empty when it is and `out` holds it.
POLYBUS_API std::string decode(std::string_view json, std::size_t max_json_depth, Event& out);

// `unix_ns` as RFC 3339 UTC with microseconds: 2026-11-25T03:40:00.123456Z.
POLYBUS_API std::string format_time(std::int64_t unix_ns);
// The same into a buffer (no allocation); returns its length.
inline constexpr std::size_t kTimeLength = 27;
POLYBUS_API std::size_t format_time(std::int64_t unix_ns, char (&out)[kTimeLength + 1]);

// The media type of a datacontenttype is JSON: application/json, text/json, or a +json suffix.
POLYBUS_API bool is_json_content_type(std::string_view content_type);

}  // namespace polybus::cloudevents
