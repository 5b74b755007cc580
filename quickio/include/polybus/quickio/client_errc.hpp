// SPDX-License-Identifier: Apache-2.0
// Errors of the QuickIO client itself (the codec's are codec_errc, the abstraction's errc).
#pragma once

#include "polybus/export.hpp"

#include <system_error>

namespace polybus::quickio {

enum class client_errc {
  queue_full = 1,     // an event waiting to be written would exceed max_queued_bytes
  handshake_refused,  // the peer answered but does not speak QuickIO there (no 101, no /qio/ohai)
  heartbeat_timeout,  // nothing received for heartbeat_timeout
  http_status,        // an HTTP long-polling request was answered with a status other than 200
  moved,              // the server sent /qio/move: reconnecting to the address it gave
};
POLYBUS_API const std::error_category& client_category() noexcept;
POLYBUS_API std::error_code make_error_code(client_errc e) noexcept;

}  // namespace polybus::quickio

template <>
struct std::is_error_code_enum<polybus::quickio::client_errc> : std::true_type {};
