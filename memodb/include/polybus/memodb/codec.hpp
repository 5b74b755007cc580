// SPDX-License-Identifier: Apache-2.0
// Sans-IO codec for the MemoDB broker protocol memo01 (github.com/yotann/bcdb's broker, and the
// real broker's details, docs/memodb.md). One NNG message is a CBOR header array
// immediately followed by the raw payload, with no length prefix in between:
//
//   READY      ["memo01", 1, ID, [service names]]            no payload
//   JOB        ["memo01", 2, ID, service, timeout in ms]     payload: the job
//   RESULT     ["memo01", 3, ID, (optional) disconnecting]   payload: the result
//   HEARTBEAT  ["memo01", 4, ID]                              no payload
//   DISCONNECT ["memo01", 5, ID]                              no payload
//
// Encoders write deterministic CBOR (RFC 8949 section 4.2: shortest integer and length forms,
// definite lengths only) through libcbor's low-level encoders. The decoder reads the first CBOR
// item with libcbor's streaming decoder, one token at a time, checks it against the message
// type's layout and hands back the rest as the payload. It allocates nothing for the payload,
// never recurses, and bounds every field. Both directions are here, so the in-process broker
// shares it.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace polybus::memodb {

enum class errc {
  empty_message = 1,  // no bytes at all
  truncated,          // the header ends before its last field
  malformed_cbor,     // not well-formed CBOR (reserved initial byte, stray break)
  indefinite_length,  // an indefinite-length array or string (deterministic CBOR has none)
  wrong_type,         // a field (or the header itself) of the wrong CBOR type
  nesting,            // an array or map where a scalar field belongs
  wrong_version,      // the version field is not "memo01"
  unknown_type,       // a message type other than 1 to 5
  wrong_field_count,  // the header array's length does not fit its message type
  field_too_long,     // an ID, a service name or a service list over its limit
  invalid_service,    // an empty service name, or one that is not valid UTF-8
  unsorted_services,  // READY names repeated, or not sorted by length then bytewise
  // SP, the layer under memo01 (polybus/memodb/sp.hpp):
  sp_bad_header,         // the peer's connection header is not SP, or names the wrong protocol
  sp_bad_frame,          // an IPC message whose type byte is not 1
  sp_message_too_large,  // a message's length over the limit
  sp_no_backtrace,       // a request or reply without its request ID
};
POLYBUS_API const std::error_category& memodb_category() noexcept;
POLYBUS_API std::error_code make_error_code(errc e) noexcept;

enum class MessageType : std::uint8_t {
  ready = 1,
  job = 2,
  result = 3,
  heartbeat = 4,
  disconnect = 5,
};
POLYBUS_API const char* to_string(MessageType type) noexcept;

inline constexpr std::string_view kProtocolVersion = "memo01";
// The real broker's worker IDs are 4 bytes and clients send an empty one: 64 is generous.
inline constexpr std::size_t kMaxIdLength = 64;
inline constexpr std::size_t kMaxServiceLength = 255;
inline constexpr std::size_t kMaxServices = 256;

// A decoded header. The views point into the decoded message.
struct POLYBUS_API Header {
  MessageType type = MessageType::ready;
  std::string_view id;
  std::vector<std::string_view> services;  // READY
  std::string_view service;                // JOB
  std::uint64_t timeout_ms = 0;            // JOB
  std::optional<bool> disconnecting;       // RESULT, when present
};

// Decodes the header at the front of `message`; `payload` is every byte after it. On error,
// `header` and `payload` are unspecified. Accepts non-shortest integer and length forms (as the
// real broker does) but no indefinite lengths.
POLYBUS_API std::error_code decode(std::string_view message, Header& header,
                                   std::string_view& payload);

// ---- service names ----
// A valid name is 1 to kMaxServiceLength bytes of valid UTF-8.
POLYBUS_API std::error_code validate_service(std::string_view name);
// The order READY needs: by length, then bytewise; repeats removed.
POLYBUS_API bool service_order(std::string_view a, std::string_view b) noexcept;
POLYBUS_API std::vector<std::string> canonical_services(std::vector<std::string> names);

// ---- encoders: append the header to `out` (the caller appends any payload after it) ----
// READY's ID is always empty. The names are validated, sorted and de-duplicated here.
[[nodiscard]] POLYBUS_API std::error_code append_ready(std::string& out,
                                                       std::vector<std::string> services);
[[nodiscard]] POLYBUS_API std::error_code append_job(std::string& out, std::string_view id,
                                                     std::string_view service,
                                                     std::uint64_t timeout_ms);
[[nodiscard]] POLYBUS_API std::error_code append_result(
    std::string& out, std::string_view id, std::optional<bool> disconnecting = std::nullopt);
[[nodiscard]] POLYBUS_API std::error_code append_heartbeat(std::string& out, std::string_view id);
[[nodiscard]] POLYBUS_API std::error_code append_disconnect(std::string& out, std::string_view id);

}  // namespace polybus::memodb

template <>
struct std::is_error_code_enum<polybus::memodb::errc> : std::true_type {};
