// SPDX-License-Identifier: Apache-2.0
// The client-wide budget: how much the wire may make a client hold, buffer or wait for. One set of
// options (declared in the core option table, so every scheme has them), read once per client and
// honoured by every adapter: the transport enforces the byte and time bounds of a connection,
// the subscription dispatcher the bound on what waits for handlers, and each protocol machine
// the bounds only it can see (JSON depth, decompressed bytes, redirects). A violation closes that
// connection with errc::limit_exceeded and a message naming the limit, its value and what was
// seen; the adapter then reconnects with backoff. Nothing else on the client is affected.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace polybus {

class ResolvedOptions;

struct POLYBUS_API Budget {
  std::size_t max_frame_size = 16 * 1024 * 1024;        // one frame or message from the wire
  std::size_t max_write_buffer = 64 * 1024 * 1024;      // bytes queued to write, per connection
  std::size_t max_decoded_per_read = 32 * 1024 * 1024;  // decompressed bytes from one read
  std::chrono::milliseconds frame_timeout{30000};       // a begun frame must complete within this
  std::uint32_t max_held_messages = 10000;  // per subscription, waiting for its handlers
  std::size_t max_held_bytes = 64 * 1024 * 1024;
  std::uint32_t max_json_depth = 64;  // nesting of any JSON read from or written to the wire
  std::uint32_t max_redirects = 10;   // server-ordered moves in a row without a stable session

  static Budget from_options(const ResolvedOptions& options);
};

// A frame the application asks to send (a publish) that could overfill max_write_buffer: one is
// sent only while under half of it is queued (Transport::write_room), so at most half fits. Empty
// when it fits; else the text to refuse it with (errc::limit_exceeded), rather than sending it
// and ending the connection, again on every attempt.
POLYBUS_API std::string frame_over_write_room(const Budget& budget, std::size_t frame_bytes);

// "<what>: <seen> exceeds <option>=<limit>": the text every budget violation carries.
POLYBUS_API std::string limit_exceeded_text(std::string_view what, std::string_view option,
                                            std::uint64_t limit, std::uint64_t seen);

}  // namespace polybus
