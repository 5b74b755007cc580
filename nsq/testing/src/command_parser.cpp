// SPDX-License-Identifier: Apache-2.0
#include "command_parser.hpp"

#include <algorithm>

namespace polybus::nsq::testing::detail {

CommandParser::Result CommandParser::feed(std::string_view input) {
  Result result;
  switch (state_) {
    case State::line: {
      // The previous step's views are released now; a partial line stays.
      if (!params_.empty()) {
        params_.clear();
        line_.clear();
      }
      release_body();
      const std::size_t newline = input.find('\n');
      const std::size_t take = newline == std::string_view::npos ? input.size() : newline + 1;
      // The newline itself does not count toward the limit; everything before it does.
      if (line_.size() + (newline == std::string_view::npos ? take : newline) > max_line_length_) {
        result.error = std::make_error_code(std::errc::message_size);
        return result;
      }
      line_.append(input.data(), take);
      result.consumed = take;
      if (newline == std::string_view::npos) return result;
      std::string_view line(line_);
      line.remove_suffix(1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      params_.clear();
      // Split on every single space, as nsqd does: "A  B" has an empty word between.
      while (true) {
        const std::size_t space = line.find(' ');
        params_.push_back(line.substr(0, space));
        if (space == std::string_view::npos) break;
        line.remove_prefix(space + 1);
      }
      result.event = Event::line;
      return result;
    }
    case State::size: {
      const std::size_t take = std::min(sizeof size_bytes_ - size_filled_, input.size());
      std::copy_n(input.data(), take, size_bytes_ + size_filled_);
      size_filled_ += take;
      result.consumed = take;
      if (size_filled_ < sizeof size_bytes_) return result;
      std::uint32_t raw = 0;
      for (const char c : size_bytes_) raw = (raw << 8) | static_cast<unsigned char>(c);
      size_ = static_cast<std::int32_t>(raw);
      state_ = State::line;  // until the caller accepts a body
      line_.clear();
      params_.clear();
      result.event = Event::body_size;
      return result;
    }
    case State::body: {
      // A body wholly in this input is handed out in place; only a split one is copied.
      if (body_buffer_.empty() && input.size() >= body_expected_) {
        body_ = input.substr(0, body_expected_);
        result.consumed = body_expected_;
      } else {
        const std::size_t take = std::min(body_expected_ - body_buffer_.size(), input.size());
        if (body_buffer_.empty()) body_buffer_.reserve(body_expected_);
        body_buffer_.append(input.data(), take);
        result.consumed = take;
        if (body_buffer_.size() < body_expected_) return result;
        body_ = body_buffer_;
      }
      state_ = State::line;
      result.event = Event::body;
      return result;
    }
  }
  return result;
}

void CommandParser::release_body() {
  body_ = {};
  // A large body's buffer is not kept for the life of the connection.
  if (body_buffer_.capacity() > kKeptBodyCapacity) {
    std::string().swap(body_buffer_);
  } else {
    body_buffer_.clear();
  }
}

void CommandParser::expect_size() {
  state_ = State::size;
  size_filled_ = 0;
  size_ = 0;
}

void CommandParser::expect_body(std::size_t size) {
  state_ = State::body;
  body_expected_ = size;
  body_buffer_.clear();
  body_ = {};
}

}  // namespace polybus::nsq::testing::detail
