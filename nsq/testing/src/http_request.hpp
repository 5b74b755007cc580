// Sans-IO reader of HTTP/1.x requests, as much as the test nsqlookupd needs: the request line, the
// headers that decide framing and keep-alive, and a body skipped by its Content-Length. Several
// requests may arrive in one read (pipelining) or one request over many.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace polybus::nsq::testing::detail {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string query;  // after '?', still percent-encoded
  bool keep_alive = true;
};

class HttpRequestReader {
 public:
  enum class Status { need_more, request, bad_request, too_large, unsupported };
  struct Result {
    std::size_t consumed = 0;
    Status status = Status::need_more;
  };

  explicit HttpRequestReader(std::size_t max_header_bytes = 16 * 1024,
                             std::size_t max_body_bytes = 1024 * 1024)
      : max_header_bytes_(max_header_bytes), max_body_bytes_(max_body_bytes) {}

  // On Status::request, request() holds it (its body already skipped). bad_request, too_large
  // and unsupported (chunked bodies) are final: answer and close.
  Result feed(std::string_view input);
  const HttpRequest& request() const { return request_; }

 private:
  Status parse_head();

  std::size_t max_header_bytes_;
  std::size_t max_body_bytes_;
  std::string head_;
  std::size_t body_remaining_ = 0;
  bool in_body_ = false;
  HttpRequest request_;
};

// url.ParseQuery's value for `key` (the first one), percent- and '+'-decoded. nullopt when the key
// is absent; false in `valid` when the query is malformed (Go answers 400 INVALID_REQUEST).
std::optional<std::string> query_value(std::string_view query, std::string_view key, bool& valid);

}  // namespace polybus::nsq::testing::detail
