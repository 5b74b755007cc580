// SPDX-License-Identifier: Apache-2.0
// The client's shared state: its counters' snapshot, and its error and log hooks.
#include "client_shared.hpp"

namespace polybus {

namespace detail {

Stats AtomicStats::snapshot() const {
  Stats s;
  s.published = published.load();
  s.publish_acked = publish_acked.load();
  s.publish_failed = publish_failed.load();
  s.received = received.load();
  s.acked = acked.load();
  s.nacked = nacked.load();
  s.discarded = discarded.load();
  s.dead_lettered = dead_lettered.load();
  s.delivered_raw = delivered_raw.load();
  s.requests = requests.load();
  s.replies = replies.load();
  s.reconnects = reconnects.load();
  s.bytes_in = bytes_in.load();
  s.bytes_out = bytes_out.load();
  return s;
}

void ClientShared::emit_error(std::error_code ec, const std::string& message) const {
  if (closed.load()) return;
  if (on_error) {
    try {
      on_error(ec, message);
    } catch (...) {
    }
  } else {
    log(LogLevel::warn, message + " (" + ec.message() + ")");
  }
}

void ClientShared::log(LogLevel level, std::string_view text) const {
  if (log_sink && level >= log_level) {
    try {
      log_sink(level, text);
    } catch (...) {
    }
  }
}

}  // namespace detail
}  // namespace polybus
