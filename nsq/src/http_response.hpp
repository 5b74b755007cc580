// A small, bounded HTTP/1.1 response parser for nsqlookupd's answers (sans I/O): status line,
// Content-Length or chunked bodies, or a body that runs to the end of the stream.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace polybus::nsq {

class HttpResponseParser {
 public:
  explicit HttpResponseParser(std::size_t max_size) : max_size_(max_size) {}

  // Adds bytes; returns an error for a malformed or oversized response.
  std::error_code feed(std::string_view bytes);
  // The peer closed the stream: a body without a length ends here.
  std::error_code finish();
  bool complete() const { return complete_; }
  int status() const { return status_; }
  const std::string& body() const { return body_; }

 private:
  std::error_code parse();

  std::size_t max_size_;
  std::string raw_;
  std::string body_;
  int status_ = 0;
  bool headers_done_ = false;
  bool chunked_ = false;
  bool has_length_ = false;
  std::size_t length_ = 0;
  std::size_t body_start_ = 0;
  bool complete_ = false;
};

}  // namespace polybus::nsq
