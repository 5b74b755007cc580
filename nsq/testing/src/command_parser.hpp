// SPDX-License-Identifier: Apache-2.0
// Sans-IO reader of what a client sends nsqd after the magic: a command line ("PUB topic\n", words
// split on single spaces, an optional '\r' before the '\n' dropped), then for some commands a
// 4-byte big-endian size and that many body bytes.
//
// The caller judges each step before the parser goes on, because nsqd answers a bad line or a bad
// size before reading what follows it:
//
//   Event::line       params() holds the words; call expect_size() if a size follows, else the
//                     next feed() reads the next line
//   Event::body_size  size() holds the signed size; call expect_body(n) to read the body
//   Event::body       body() holds it; the next feed() reads the next line
//
// Memory is bounded by the caller's choices: a line longer than max_line_length is an error (nsqd
// closes the connection when its 16 KiB read buffer fills without a newline), and only a body the
// caller accepted is buffered, and only when it arrives split over several feeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace polybus::nsq::testing::detail {

class CommandParser {
 public:
  enum class Event { need_more, line, body_size, body };
  struct Result {
    std::size_t consumed = 0;
    Event event = Event::need_more;
    std::error_code error;  // std::errc::message_size: a line over max_line_length
  };

  explicit CommandParser(std::size_t max_line_length) : max_line_length_(max_line_length) {}

  // Consumes input up to the end of the next step, at most; Event::need_more when `input` ended
  // first (everything consumed). Views handed out stay valid until the next feed() (body() may
  // view `input` itself).
  Result feed(std::string_view input);

  const std::vector<std::string_view>& params() const { return params_; }
  void expect_size();
  std::int32_t size() const { return size_; }
  void expect_body(std::size_t size);
  std::string_view body() const { return body_; }

 private:
  enum class State { line, size, body };
  static constexpr std::size_t kKeptBodyCapacity = 64 * 1024;

  void release_body();

  std::size_t max_line_length_;
  State state_ = State::line;
  std::string line_;
  std::vector<std::string_view> params_;
  char size_bytes_[4] = {};
  std::size_t size_filled_ = 0;
  std::int32_t size_ = 0;
  std::size_t body_expected_ = 0;
  std::string body_buffer_;
  std::string_view body_;
};

}  // namespace polybus::nsq::testing::detail
