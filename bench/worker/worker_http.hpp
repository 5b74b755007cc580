// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 front of an OMB worker: a listener and its keep-alive connections on an io thread
// of their own, handing each whole request to one handler thread, one request at a time (a
// handler may block: closing a driver's clients waits for them), and writing its answer as OMB's
// worker (Javalin) writes one: `Content-Type: text/plain;charset=utf-8` and a Content-Length.
// Heads, bodies, connections and the time a request may take to arrive are bounded.
#pragma once

#include <asio/ip/tcp.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace polybus::bench::worker {

struct HttpLimits {
  std::size_t max_head = 16 * 1024;
  std::size_t max_body = 64 << 20;  // /start-load carries the payloads, base64
  std::size_t max_connections = 64;
  // The bodies of all requests being read or handled together: one past it is answered 503.
  std::size_t max_pending_bytes = 4 * max_body;
  // A request must arrive whole this long after its first byte; a new connection must send one
  // within first_byte, and an idle one is closed after idle (OMB's coordinator drops its own
  // idle connections after 60 s).
  std::chrono::milliseconds request_time{60'000}, first_byte{10'000}, idle{120'000};
};

struct HttpAnswer {
  int status = 200;
  std::string body;
};

class WorkerHttp {
 public:
  // Runs on the handler thread, one call at a time; a throw answers 500.
  using Handler = std::function<HttpAnswer(std::string_view method, std::string_view path,
                                           std::string_view body)>;

  // Listens at once (throws std::system_error when it cannot).
  WorkerHttp(const asio::ip::tcp::endpoint& endpoint, Handler handler, HttpLimits limits = {});
  // Stops listening, closes the connections, lets a running handler finish and drops the
  // requests still queued.
  ~WorkerHttp();
  WorkerHttp(const WorkerHttp&) = delete;
  WorkerHttp& operator=(const WorkerHttp&) = delete;

  asio::ip::tcp::endpoint local_endpoint() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace polybus::bench::worker
