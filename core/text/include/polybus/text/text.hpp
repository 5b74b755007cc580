// SPDX-License-Identifier: Apache-2.0
// Text helpers that adapters and in-process brokers share: strict UTF-8, JSON string literals,
// hex digits and %-decoding. One copy each, so that a fix (or a fuzz finding) lands everywhere.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace polybus::text {

// Length of the valid UTF-8 sequence at the start of `text` (1 to 4) and its code point, or 0
// when there is none: a stray continuation byte, a truncated sequence, an overlong form, a
// surrogate or a code point above U+10FFFF.
POLYBUS_API std::size_t utf8_sequence(std::string_view text, std::uint32_t& code_point);

// Strict UTF-8 throughout (see utf8_sequence).
POLYBUS_API bool is_valid_utf8(std::string_view text);

// How a JSON string literal escapes what it must.
enum class JsonEscapes {
  standard,  // ", \, the short escapes (\b \f \n \r \t), other controls as \u00XX
  go,        // as Go's encoding/json: \n \r \t short, other controls, <, > and & as \u00XX
};

// `text` as a JSON string literal, quotes included. Bytes of 0x80 and above are copied as they
// are: the caller has checked (or does not need) UTF-8.
POLYBUS_API std::string json_quote(std::string_view text,
                                   JsonEscapes escapes = JsonEscapes::standard);
POLYBUS_API void append_json_quoted(std::string& out, std::string_view text,
                                    JsonEscapes escapes = JsonEscapes::standard);

// The value of a hex digit (either case), or -1.
POLYBUS_API int hex_digit_value(char c);
// Two lowercase hex digits of `byte`, after `prefix` ("\\x", "\\u00", "%").
POLYBUS_API void append_hex_byte(std::string& out, std::string_view prefix, unsigned byte);

// What percent_decode found wrong.
enum class PercentError { none, truncated_escape, bad_escape };
POLYBUS_API const char* describe(PercentError error);  // "truncated %-escape", "bad %-escape"

// `in` as one component of a URL's query (RFC 3986): unreserved bytes (letters, digits, "-",
// ".", "_", "~") as they are, every other byte as %XX, so that "#", "&", "=", "+" and spaces
// stay inside the value.
POLYBUS_API std::string percent_encode(std::string_view in);

// %XX escapes decoded (and '+' as a space when plus_is_space: form and query encoding) into
// `out`, which is replaced. On an error `out` holds what was decoded before it.
POLYBUS_API PercentError percent_decode(std::string_view in, std::string& out, bool plus_is_space);

// One complete JSON value (RFC 8259; strings well-formed UTF-8), nested at most max_depth deep,
// with white space around it and nothing else. Allocates nothing up to 64 levels deep.
POLYBUS_API bool is_valid_json(std::string_view json, std::size_t max_depth);
// Without the white space JSON allows around a value (space, tab, CR, LF).
POLYBUS_API std::string_view trim_json_space(std::string_view json);

// ASCII-lowercase copy (HTTP header names, tokens).
POLYBUS_API std::string ascii_lower(std::string_view text);
// Without leading and trailing spaces, tabs and a trailing CR (HTTP header values).
POLYBUS_API std::string_view trim_http_space(std::string_view text);

// Base64 (RFC 4648, standard alphabet, padded), appended to `out`.
POLYBUS_API void append_base64(std::string& out, std::string_view bytes);
// Strict: the standard alphabet, padding to a multiple of 4, nothing else (no spaces, no line
// breaks). Returns false, with `out` unspecified, on anything else; `bad_at` is its offset.
POLYBUS_API bool base64_decode(std::string_view text, std::string& out, std::size_t& bad_at);

}  // namespace polybus::text
