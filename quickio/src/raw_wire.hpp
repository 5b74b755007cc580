// SPDX-License-Identifier: Apache-2.0
// Raw TCP: the 9 bytes /qio/ohai both ways (no length prefix), then 8-byte big-endian length
// frames each holding one event.
#pragma once

#include "polybus/quickio/codec.hpp"
#include "wire.hpp"

namespace polybus::quickio::detail {

class RawWire : public Wire {
 public:
  RawWire(std::size_t max_frame_size, WireHandler& handler)
      : handler_(handler), decoder_(max_frame_size) {}
  void start() override;
  std::error_code receive(const std::shared_ptr<const void>& owner, std::string_view bytes,
                          std::string& why) override;
  void send(std::string_view event) override;
  std::string& output() override { return output_; }
  bool is_open() const override { return open_; }
  bool partial_frame() const override { return open_ ? decoder_.partial() : !handshake_.empty(); }

 private:
  WireHandler& handler_;
  RawFrameDecoder decoder_;
  std::string handshake_;  // the answer's bytes so far (it may arrive split)
  std::string output_;
  bool open_ = false;
};

}  // namespace polybus::quickio::detail
