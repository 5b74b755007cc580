// Sans-IO HTTP/1.1 request parser for the server's long-polling and upgrade requests: a bounded
// head, then a body of exactly Content-Length bytes (bounded too). Requests follow one another on
// a keep-alive connection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus::quickio::testing {

struct HttpRequest {
  std::string method;
  std::string target;
  bool http_1_1 = true;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::optional<std::size_t> content_length;
  bool chunked = false;
  std::string body;

  const std::string* header(std::string_view lower_name) const;
  bool keep_alive() const;
  // The value of a query parameter of the target, if present.
  std::optional<std::string> query(std::string_view name) const;
};

class HttpRequestParser {
 public:
  HttpRequestParser(std::size_t max_head, std::size_t max_body);

  enum class Status { need_more, head_ready, request_ready, error };
  struct Result {
    std::size_t consumed = 0;
    Status status = Status::need_more;
    int error_status = 0;  // an HTTP status for Status::error (400, 411, 413, 431)
  };
  // head_ready is reported once, after the head, so the caller can take over the connection
  // (an upgrade) or refuse the request before its body; feed on to get request_ready.
  Result feed(std::string_view input);
  const HttpRequest& request() const { return request_; }
  const std::string& raw_head() const { return head_; }
  void next();  // forget the finished request, for the next one on the connection

 private:
  Result parse_head(std::size_t consumed);

  std::size_t max_head_;
  std::size_t max_body_;
  enum class State { head, body, done } state_ = State::head;
  std::string head_;
  HttpRequest request_;
};

}  // namespace polybus::quickio::testing
