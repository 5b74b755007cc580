// A bounded, incremental HTTP/1.1 response reader, sans I/O: what the NSQ adapter reads from
// nsqlookupd and the QuickIO adapter from long polling. Bytes in as they arrive, any split;
// Content-Length, chunked and read-to-close bodies; interim 1xx answers skipped. Every length
// is bounded and every refusal says what was wrong, with the limit and the value seen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace polybus::http {

// The status of an HTTP/1.x status line ("HTTP/1.1 200 OK", line end optional): exactly three
// digits after "HTTP/1.<digit> ", from 100 to 599; -1 for anything else.
int status_of(std::string_view status_line);

class ResponseReader {
 public:
  // max_body bounds the body however it is framed and is called limit_name in errors (the
  // option a user would raise, e.g. "max_frame_size"); max_head bounds the status line and
  // headers together, and the chunk trailers.
  explicit ResponseReader(std::size_t max_body, std::string limit_name = "max_body",
                          std::size_t max_head = 64 * 1024);

  // Bytes of the response. An error (polybus::errc::protocol_error, or frame_too_large for a
  // limit) is final; why() says what was wrong. Bytes after a complete response are ignored.
  std::error_code feed(std::string_view bytes);
  // The peer closed the stream: a body without a length ends here; anything else cut short is
  // an error.
  std::error_code finish();

  bool complete() const { return state_ == State::done; }
  int status() const { return status_; }
  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view lower_name) const;
  std::string& body() { return body_; }
  const std::string& why() const { return why_; }

 private:
  enum class State {
    head,
    length_body,
    chunk_size,
    chunk_data,
    chunk_end,
    trailers,
    to_close,
    done,
    failed,
  };

  std::error_code fail(std::error_code ec, std::string why);
  void consume_head(std::string_view& bytes);
  void parse_head();
  void consume_body(std::string_view& bytes);
  // One line of a chunked body's framing (size line, CRLF after data, trailer) into line_, at
  // most max_line bytes: true when it is whole.
  bool take_line(std::string_view& bytes, std::size_t max_line);

  std::size_t max_body_;
  std::string limit_name_;
  std::size_t max_head_;
  State state_ = State::head;
  std::error_code error_;
  std::string head_;            // the head so far
  std::size_t line_start_ = 0;  // where its last, unfinished line starts
  int interim_responses_ = 0;
  std::string line_;  // a framing line of a chunked body so far
  std::size_t trailer_bytes_ = 0;
  std::size_t remaining_ = 0;  // body bytes still due (Content-Length, or this chunk)
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::string body_;
  std::string why_;
};

}  // namespace polybus::http
