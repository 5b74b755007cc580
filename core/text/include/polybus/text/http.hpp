// SPDX-License-Identifier: Apache-2.0
// Bounded, incremental HTTP/1.1 readers, sans I/O. ResponseReader: what the NSQ adapter reads
// from nsqlookupd and the QuickIO adapter from long polling (Content-Length, chunked and
// read-to-close bodies; interim 1xx answers skipped). RequestReader: what the in-process brokers
// (nsqlookupd, QuickIO) read from clients. Bytes in as they arrive, any split; every length is
// bounded, and a head dripped a byte at a time costs linear time.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace polybus::http {

// A message head taken line by line, so that it holds the head only and each byte is looked at
// once. Lines end with LF, an optional CR before it dropped.
class POLYBUS_API HeadLines {
 public:
  explicit HeadLines(std::size_t max_head) : max_head_(max_head) {}
  enum class Step { need_more, line, end, too_large };
  // Takes bytes from the front of `bytes` up to the end of the next line: `line` (without its
  // end) and Step::line, or Step::end for the empty line that ends the head.
  Step take(std::string_view& bytes, std::string_view& line);
  const std::string& head() const { return head_; }  // everything taken, line ends included
  std::size_t max_head() const { return max_head_; }
  void clear() {
    head_.clear();
    line_start_ = 0;
  }

 private:
  std::size_t max_head_;
  std::string head_;
  std::size_t line_start_ = 0;
};

// A header line "Name: value": the name lower-cased, the value trimmed. False when it is not one
// (no colon, an empty name, or obsolete folding).
POLYBUS_API bool parse_header_line(std::string_view line, std::string& name,
                                   std::string_view& value);

// The status of an HTTP/1.x status line ("HTTP/1.1 200 OK", line end optional): exactly three
// digits after "HTTP/1.<digit> ", from 100 to 599; -1 for anything else.
POLYBUS_API int status_of(std::string_view status_line);

// RFC 9110's reason phrase for the statuses our servers answer ("Not Found"); "Error" for others.
POLYBUS_API const char* reason_phrase(int status);

class POLYBUS_API ResponseReader {
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
  // Complete, and the connection may carry another request: the body had its own end (a length,
  // chunks, or none), nothing followed the response, and no "Connection: close". The version is
  // not asked: QuickIO's server answers an HTTP/1.1 request with HTTP/1.0 and keeps the
  // connection. A caller reusing a connection the server then ends anyway must be ready to
  // send again a request that got no answer.
  bool reusable() const;
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
  void end_of_head();
  void consume_body(std::string_view& bytes);
  // One line of a chunked body's framing (size line, CRLF after data, trailer) into line_, at
  // most max_line bytes: true when it is whole.
  bool take_line(std::string_view& bytes, std::size_t max_line);

  std::size_t max_body_;
  std::string limit_name_;
  State state_ = State::head;
  std::error_code error_;
  HeadLines head_;
  bool chunked_ = false;
  bool to_close_ = false;     // the body ran to the end of the stream
  bool extra_bytes_ = false;  // bytes came after the response
  std::optional<std::size_t> content_length_;
  int interim_responses_ = 0;
  std::string line_;  // a framing line of a chunked body so far
  std::size_t trailer_bytes_ = 0;
  std::size_t remaining_ = 0;  // body bytes still due (Content-Length, or this chunk)
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::string body_;
  std::string why_;
};

struct POLYBUS_API Request {
  std::string method;
  std::string target;  // as sent
  std::string path;    // the target's path (an absolute-form target reduced to it)
  std::string query;   // after '?', still %-encoded
  bool http_1_1 = true;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::optional<std::size_t> content_length;
  bool chunked = false;  // Transfer-Encoding other than identity: the server decides (411, 501)
  std::string body;

  const std::string* header(std::string_view lower_name) const;
  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "Connection: keep-alive".
  bool keep_alive() const;
  // The raw (still %-encoded) value of the first query parameter `key`, if present.
  std::optional<std::string> query_parameter(std::string_view key) const;
};

class POLYBUS_API RequestReader {
 public:
  RequestReader(std::size_t max_head, std::size_t max_body);

  enum class Status { need_more, head_ready, request_ready, error };
  struct Result {
    std::size_t consumed = 0;
    Status status = Status::need_more;
    int error_status = 0;  // for Status::error: 400, 413, 431 or 501, to answer before closing
  };
  // head_ready comes once, after the head, so the caller can take the connection over (an
  // upgrade) or refuse the request before its body; feed on for request_ready (at once when
  // there is no body). A chunked body is not read: feeding on after its head is a 501. An error
  // is final. Requests follow one another after next().
  Result feed(std::string_view input);
  const Request& request() const { return request_; }
  const std::string& raw_head() const { return head_.head(); }
  void next();  // forget the finished request, for the next one on the connection

 private:
  std::size_t max_body_;
  enum class State { head, body, done, failed } state_ = State::head;
  HeadLines head_;
  Request request_;
  int error_status_ = 0;
};

}  // namespace polybus::http
