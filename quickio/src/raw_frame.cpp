// SPDX-License-Identifier: Apache-2.0
// Raw TCP framing: an 8-byte big-endian length, then that many bytes of event text.
#include <algorithm>
#include <cstring>

#include "polybus/quickio/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::quickio {

void append_raw_frame_header(std::string& out, std::size_t event_size) {
  append_big_endian<8>(out, static_cast<std::uint64_t>(event_size));
}

void append_raw_frame(std::string& out, std::string_view event) {
  out.reserve(out.size() + kRawLengthSize + event.size());
  append_raw_frame_header(out, event.size());
  out.append(event);
}

RawFrameDecoder::RawFrameDecoder(std::size_t max_frame_size) : max_(max_frame_size) {}

void RawFrameDecoder::reset() {
  length_filled_ = 0;
  size_ = 0;
  buffer_.clear();
  buffering_ = false;
  error_.clear();
}

RawFrameDecoder::Result RawFrameDecoder::parse(std::string_view input, std::string_view& frame) {
  if (error_) return {0, false, error_};
  std::size_t used = 0;
  if (length_filled_ < kRawLengthSize) {
    std::size_t n = std::min(kRawLengthSize - length_filled_, input.size());
    std::memcpy(length_ + length_filled_, input.data(), n);
    length_filled_ += n;
    used += n;
    if (length_filled_ < kRawLengthSize) return {used, false, {}};
    size_ = read_big_endian<kRawLengthSize>(reinterpret_cast<const char*>(length_));
    // Checked before anything is buffered: a hostile length never becomes an allocation.
    if (size_ > max_)
      error_ = make_error_code(codec_errc::frame_too_large);
    else if (size_ == 0)
      error_ = make_error_code(codec_errc::malformed_frame);  // no event text
    if (error_) return {used, false, error_};
  }
  std::string_view rest = input.substr(used);
  if (!buffering_) {
    if (rest.size() >= size_) {
      frame = rest.substr(0, static_cast<std::size_t>(size_));
      length_filled_ = 0;
      return {used + static_cast<std::size_t>(size_), true, {}};
    }
    buffering_ = true;
    buffer_.clear();
  }
  std::size_t n = std::min(static_cast<std::size_t>(size_) - buffer_.size(), rest.size());
  buffer_.append(rest.data(), n);
  used += n;
  if (buffer_.size() < size_) return {used, false, {}};
  frame = buffer_;
  buffering_ = false;
  length_filled_ = 0;
  return {used, true, {}};
}

}  // namespace polybus::quickio
