// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

#include "polybus/adapter/registry.hpp"

namespace polybus::quickio::detail {

OptionTable option_table() {
  constexpr std::int64_t hour = 3'600'000;
  OptionTable table = core_option_table();
  // The document's backoff: 100 ms doubling to 25.6 s, reset after a handshake.
  table.set_default("reconnect_backoff", "exponential");
  table.set_default("reconnect_initial", "100ms");
  table.set_default("reconnect_max", "25600ms");
  table.add({
      {"heartbeat_timeout", OptionType::duration, "65s", 0, 24 * hour,
       "reconnect after this long without receiving anything (0: never)"},
      {"http_poll_delay_max", OptionType::duration, "2s", 0, hour,
       "HTTP long polling: a new POST leaves after a random delay in [0, this]"},
      {"http_fallback", OptionType::boolean, "true", 0, 0,
       "quickio+ws: when the server refuses the WebSocket upgrade, use HTTP long polling (false: "
       "retry WebSocket with backoff, as socket.io's transports: ['websocket'])"},
      {"http_request_timeout", OptionType::duration, "60s", 1, 24 * hour,
       "HTTP long polling: a request unanswered for this long drops the connection"},
      {"max_queued_bytes", OptionType::integer, "8388608", 0, std::int64_t{1} << 40,
       "events not yet written, in bytes: queued while disconnected or waiting for the "
       "connection; over it a send without a callback (a publish) fails at once"},
      {"max_held_bytes", OptionType::integer, "8388608", 0, std::int64_t{1} << 40,
       "events held for a paused subscription, in bytes; past it they are dropped and reported"},
      {"payload",
       OptionType::choice,
       "text",
       0,
       0,
       "polybus payloads as JSON strings (text) or as JSON text sent verbatim (json)",
       {"text", "json"}},
  });
  return table;
}

}  // namespace polybus::quickio::detail
