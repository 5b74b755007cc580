// SPDX-License-Identifier: Apache-2.0
// WebSocket through websocketpp's iostream client config, which is sans I/O: the upgrade
// request and masked frames are written through a write handler into output(), received bytes
// are fed with read_all. Subprotocol "quickio"; after the 101, a text frame /qio/ohai both ways.
#pragma once

#include <memory>
#include <string>

#include "wire.hpp"

namespace polybus::quickio::detail {

class WsWire : public Wire {
 public:
  // host_port as written in the Host header; path "" or starting with '/'.
  WsWire(std::string host_port, std::string path, std::size_t max_frame_size, WireHandler& handler);
  ~WsWire() override;
  void start() override;
  std::error_code receive(const std::shared_ptr<const void>& owner, std::string_view bytes,
                          std::string& why) override;
  void send(std::string_view event) override;
  std::string& output() override;
  bool is_open() const override;
  bool partial_frame() const override;
  std::uint64_t frames_completed() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace polybus::quickio::detail
