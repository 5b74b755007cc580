// SPDX-License-Identifier: Apache-2.0
// One connection to a QuickIO server, whatever carries it (a TCP stream with a Wire, or HTTP
// long polling), as the connection sees it. Runs on the connection's strand.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "machine.hpp"

namespace polybus::quickio::detail {

class Link;

class LinkHandler {
 public:
  virtual ~LinkHandler() = default;
  virtual void on_link_open(Link* link) = 0;
  virtual void on_link_event(Link* link, std::string_view text,
                             const std::shared_ptr<const void>& owner) = 0;
  virtual void on_link_activity(Link* link) = 0;  // a whole frame (or response) arrived
  // After write_room() said no: there is room again.
  virtual void on_link_write_room(Link*) {}
  // Once per link, unless close() came first. refused: the server was reached but did not
  // complete the QuickIO handshake there (for WebSocket, the cue to fall back to HTTP).
  virtual void on_link_closed(Link* link, std::error_code ec, const std::string& detail,
                              bool refused) = 0;
};

// Called once when an event sent through a link reached the socket, or with an error when it
// never will (the link ended first). expired, when set, says the sender no longer wants the
// event (its deadline passed): one given back unsent (take_unsent) is then not sent again.
struct WrittenFn {
  WrittenFn(SentFn fn = {}, ExpiredFn expired = {})
      : fn(std::move(fn)), expired(std::move(expired)) {}
  explicit operator bool() const { return static_cast<bool>(fn); }
  void operator()(std::error_code ec) { fn(ec); }
  SentFn fn;
  ExpiredFn expired;
};

// An event given to send() that no socket ever took, given back when the link fails.
struct UnsentEvent {
  std::string text;
  WrittenFn written;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual void start() = 0;
  // After on_link_open; the link copies the event (or writes it) before it returns.
  virtual void send(std::string_view event, WrittenFn written = {}) = 0;
  virtual void close() = 0;  // no on_link_closed follows
  virtual void fail(std::error_code ec, const std::string& detail) = 0;  // on_link_closed follows
  virtual std::string endpoint() const = 0;
  virtual std::size_t unsent_bytes() const = 0;  // given to send() and not yet written
  // Room to send more events (Transport::write_room); a "no" is followed by on_link_write_room.
  virtual bool write_room() { return true; }
  // After on_link_closed: the events it held that never reached a socket, in order (their
  // WrittenFn now the taker's), to go again on the next link. A link that hands every event to
  // its socket at once has none.
  virtual std::vector<UnsentEvent> take_unsent() { return {}; }
};

}  // namespace polybus::quickio::detail
