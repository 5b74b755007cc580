// HTTP long polling's messages, sans I/O: the POST requests (sid, connect=true on the first)
// and a bounded reader of the responses (status, Content-Length or read-to-close bodies), on
// top of websocketpp's HTTP response parser.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::quickio::detail {

// 128 random bits as 32 lowercase hex digits.
std::string new_session_id(std::mt19937_64& random);

// POST <path>?sid=<sid>[&connect=true] with a text/plain body.
std::string make_poll_request(std::string_view host, std::string_view path, std::string_view sid,
                              bool connect, std::string_view body);

class HttpResponseReader {
 public:
  explicit HttpResponseReader(std::size_t max_size);
  ~HttpResponseReader();
  // Bytes of the response; an error (with why) for a malformed or oversized one.
  std::error_code feed(std::string_view bytes, std::string& why);
  // The peer closed: a body without Content-Length ends here.
  std::error_code finish(std::string& why);
  bool complete() const { return complete_; }
  int status() const { return status_; }
  std::string& body() { return body_; }

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
  std::size_t max_size_;
  std::size_t fed_ = 0;
  bool to_close_ = false;  // headers done, no Content-Length: the body runs to the close
  bool complete_ = false;
  int status_ = 0;
  // The status line as it arrives: the status is read from it, not from websocketpp, whose enum
  // cannot hold a code such as 600 (found by the quickio_http fuzzer).
  std::string status_line_;
  std::string body_;
};

// The status of an HTTP status line ("HTTP/1.1 200 OK\r\n"): three digits after the first space,
// 100 to 511; -1 for anything else. Checked before websocketpp's parser sees the line: it keeps
// the status in an enum of 0-511, and another number is undefined behaviour in it.
int http_status_of(std::string_view status_line);

// The server's address in the answer to /qio/hostname: "host", "host:port" or a URL.
struct HostAnswer {
  std::string host;
  std::uint16_t port = 0;  // 0: keep the current one
};
bool parse_host_answer(std::string_view address, HostAnswer& out);

}  // namespace polybus::quickio::detail
