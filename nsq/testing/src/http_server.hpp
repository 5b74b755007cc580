// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 server of the test nsqd and nsqlookupd: a listener and its keep-alive connections
// on the server's io thread, answering each request with what a handler returns, in the form
// Go's net/http and nsq's http_api give their answers (status line, Content-Type,
// X-Nsq-Content-Type, Date, Content-Length). Heads and bodies are bounded; a client that
// pipelines without reading is not read from while 64 answers wait for it.
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "connection_listener.hpp"
#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/text/http.hpp"

namespace polybus::nsq::testing::detail {

struct HttpResponse {
  int status = 200;
  std::string content_type;  // empty: none
  bool nsq_content_type = true;
  std::string body;
  std::string allow;  // the Allow header of a 405
};

// nsq's http_api.RespondV1 forms: an error {"message":"TEXT"}, a JSON document, a text body (Go
// sniffs "text/plain; charset=utf-8" for it), and an empty 200.
HttpResponse v1_error(int status, const std::string& message);
HttpResponse v1_json(std::string json);
HttpResponse v1_text(std::string text);
HttpResponse v1_empty();
// httprouter's answer to a known path with another method; `allow` as it lists them.
HttpResponse v1_method_not_allowed(std::string allow);

class HttpServer {
 public:
  struct Handlers {
    // Called once the head is read: an answer refuses the request before its body is read (the
    // connection then closes, as nothing tells where the unread body ends). May be empty.
    std::function<std::optional<HttpResponse>(const http::Request&)> before_body;
    std::function<HttpResponse(const http::Request&)> respond;
    // The answer to a body declared larger than max_body (the request line only is read, so
    // method, path and query are known); empty: a plain 413.
    std::function<std::optional<HttpResponse>(const http::Request&)> too_large;
    // Each request (its path the kind, its method and query the text, its topic and channel
    // from the query) and each answer (its status), when the journal records; null: none.
    polybus::testing::Journal* journal = nullptr;
    // Rules whose unit is a request's path: error answers {"message":TEXT} with the status
    // the rule's text begins with ("503 busy"; 500 without one), swallow never answers (and
    // reads no more), delay holds the answers from then on, close and reset end the
    // connection, duplicate carries the request out twice. Null: none.
    polybus::testing::FaultRules* faults = nullptr;
  };

  // Binds and listens at once (throws std::system_error); call on `io`'s thread, as every other
  // member. max_body bounds every request's body.
  HttpServer(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint, std::size_t max_body,
             Handlers handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const { return listener_->port(); }
  // Closes the listener and every connection.
  void close();

 private:
  class Connection;

  std::size_t max_body_;
  Handlers handlers_;
  std::unique_ptr<ConnectionListener<Connection>> listener_;  // last: closed first
};

}  // namespace polybus::nsq::testing::detail
