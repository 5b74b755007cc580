// SPDX-License-Identifier: Apache-2.0
// One connection's byte protocol under the session, sans I/O: the handshake, then event texts
// in and out. The owner connects a socket, writes output(), feeds what it reads to receive(),
// and hears about the handshake and each event through WireHandler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::quickio::detail {

class WireHandler {
 public:
  virtual ~WireHandler() = default;
  virtual void on_wire_open() = 0;  // the server answered /qio/ohai: events may flow
  // owner keeps text's bytes alive when set; otherwise they are valid only during the call.
  virtual void on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) = 0;
};

class Wire {
 public:
  virtual ~Wire() = default;
  // The socket is up: the handshake's first bytes go to output().
  virtual void start() = 0;
  // Bytes read; owner keeps them alive. An error (with why) means the connection must go.
  virtual std::error_code receive(const std::shared_ptr<const void>& owner, std::string_view bytes,
                                  std::string& why) = 0;
  // An event's text, after the handshake.
  virtual void send(std::string_view event) = 0;
  // Bytes to write, in order.
  virtual std::string& output() = 0;
  virtual bool is_open() const = 0;
  // Part of a frame is held: frame_timeout runs until a frame completes.
  virtual bool partial_frame() const = 0;
  // Frames completed that carried no event (control frames, the upgrade answer); events count
  // themselves.
  virtual std::uint64_t frames_completed() const { return 0; }
};

}  // namespace polybus::quickio::detail
