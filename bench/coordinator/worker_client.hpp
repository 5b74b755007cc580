// SPDX-License-Identifier: Apache-2.0
// The coordinator's side of one OMB worker (`polybus bench worker` or OMB's Java worker): HTTP/1.1
// calls over one keep-alive connection, as OMB's coordinator keeps one per worker, each bounded in
// time and in the size of its answer. A call that fails says which worker, which endpoint and
// why: refused, no answer within the bound, or a status other than 200 with the worker's words.
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace polybus::bench::coordinator {

struct WorkerCallError : std::runtime_error {
  explicit WorkerCallError(const std::string& what, int http_status = 0, bool deadline = false)
      : std::runtime_error(what), status(http_status), timed_out(deadline) {}
  int status;      // the worker's answer when it gave one other than 200; 0 when none came
  bool timed_out;  // no answer within the bound: the worker may still be doing it
};

class WorkerClient {
 public:
  // base_url: http://HOST:PORT (a trailing slash is dropped). Throws std::invalid_argument for
  // anything else. Connects at the first call.
  WorkerClient(const std::string& base_url, std::chrono::milliseconds timeout,
               std::size_t max_answer = 64 << 20);
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  // The answer's body on 200; else throws WorkerCallError.
  std::string post(std::string_view path, std::string_view body = {});
  std::string get(std::string_view path);
  const std::string& url() const { return url_; }

 private:
  std::string call(std::string_view method, std::string_view path, std::string_view body);
  // One attempt on the current connection (a new one when none is open); `answered` tells
  // whether any byte of an answer arrived.
  std::string attempt(const std::string& request, std::string_view path, bool& answered);
  void close();

  std::string url_, host_, port_;
  std::chrono::milliseconds timeout_;
  std::size_t max_answer_;
  asio::io_context io_{1};
  asio::ip::tcp::socket socket_{io_};
};

}  // namespace polybus::bench::coordinator
