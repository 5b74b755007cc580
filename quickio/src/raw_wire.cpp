// SPDX-License-Identifier: Apache-2.0
#include "raw_wire.hpp"

namespace polybus::quickio::detail {

void RawWire::start() {
  output_.append(kHandshake);
}

std::error_code RawWire::receive(const std::shared_ptr<const void>& owner, std::string_view bytes,
                                 std::string& why) {
  if (!open_) {
    std::size_t take = std::min(bytes.size(), kHandshake.size() - handshake_.size());
    handshake_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (kHandshake.substr(0, handshake_.size()) != handshake_) {
      why = "the server's handshake is not /qio/ohai";
      return make_error_code(codec_errc::malformed_frame);
    }
    if (handshake_.size() < kHandshake.size()) return {};
    open_ = true;
    handler_.on_wire_open();
  }
  static const std::shared_ptr<const void> none;
  auto ec = decoder_.feed(bytes, [&](std::string_view frame) {
    // A frame inside these bytes is a view of them (owner keeps it); one assembled across reads
    // lives in the decoder's buffer, valid only during the call.
    bool inside =
        frame.data() >= bytes.data() && frame.data() + frame.size() <= bytes.data() + bytes.size();
    handler_.on_wire_event(frame, inside ? owner : none);
  });
  if (ec == codec_errc::frame_too_large)
    why = "a raw frame declares " + std::to_string(decoder_.declared_size()) +
          " bytes: exceeds max_frame_size=" + std::to_string(decoder_.max_frame_size());
  else if (ec)
    why = "raw frame: " + ec.message();
  return ec;
}

void RawWire::send(std::string_view event) {
  append_raw_frame(output_, event);
}

}  // namespace polybus::quickio::detail
