// SPDX-License-Identifier: Apache-2.0
#include "worker_http.hpp"

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include <array>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "polybus/text/http.hpp"

namespace polybus::bench::worker {
namespace {

using asio::ip::tcp;

// After a failed accept (out of descriptors, say) the next waits this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetry{100};

std::string serialize(const HttpAnswer& answer, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(answer.status) + " " +
                    http::reason_phrase(answer.status) +
                    "\r\nServer: polybus\r\nContent-Type: text/plain;charset=utf-8\r\n"
                    "Content-Length: " +
                    std::to_string(answer.body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += answer.body;
  return out;
}

}  // namespace

struct WorkerHttp::State {
  class Connection;

  State(Handler h, HttpLimits l) : handler(std::move(h)), limits(l) {}

  void accept();
  void enqueue(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) return;
    jobs.push_back(std::move(job));
    cv.notify_one();
  }
  void run_jobs() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (stopping) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();
    }
  }

  const Handler handler;
  const HttpLimits limits;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  std::set<std::shared_ptr<Connection>> connections;  // io thread
  std::size_t pending_bytes = 0;  // bodies the connections have reserved (io thread)
  std::thread io_thread, handler_thread;
  // The handler thread's queue.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
};

// One keep-alive connection: a request read whole (bounded in size and time), handed to the
// handler thread, its answer written, then the next. Not read from while a request is handled.
class WorkerHttp::State::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(State& state, tcp::socket socket)
      : state_(state),
        socket_(std::move(socket)),
        timer_(state.io),
        reader_(state.limits.max_head, state.limits.max_body) {}

  void start() {
    arm(state_.limits.first_byte);
    read();
  }
  void close() {
    release();
    std::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    state_.connections.erase(shared_from_this());
  }

 private:
  void arm(std::chrono::milliseconds bound) {
    timer_.expires_after(bound);
    timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->close();
    });
  }
  void read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              if (!self->started_) {
                                self->started_ = true;
                                self->arm(self->state_.limits.request_time);
                              }
                              self->feed(std::string_view(self->buffer_.data(), n));
                            });
  }
  // Feeds what arrived; reads on until a request is whole, then hands it over.
  void feed(std::string_view input) {
    for (;;) {
      const auto result = reader_.feed(input);
      input.remove_prefix(result.consumed);
      switch (result.status) {
        case http::RequestReader::Status::need_more:
          return read();
        case http::RequestReader::Status::head_ready: {
          // The body's bytes against the budget of every request at once, before any is read.
          const std::size_t body = reader_.request().content_length.value_or(0);
          if (state_.pending_bytes + body > state_.limits.max_pending_bytes)
            return respond({503, http::reason_phrase(503)}, false);
          state_.pending_bytes += body;
          reserved_ = body;
          continue;
        }
        case http::RequestReader::Status::error:
          return respond({result.error_status, http::reason_phrase(result.error_status)}, false);
        case http::RequestReader::Status::request_ready:
          leftover_.assign(input);
          return dispatch();
      }
    }
  }
  void dispatch() {
    timer_.cancel();
    state_.enqueue([self = shared_from_this()] {
      const http::Request& request = self->reader_.request();
      // A handler that throws is a failed call (500), never the end of the handler thread.
      HttpAnswer answer;
      try {
        answer = self->state_.handler(request.method, request.path, request.body);
      } catch (...) {
        answer = {500, http::reason_phrase(500)};
      }
      const bool keep_alive = request.keep_alive();
      asio::post(self->state_.io, [self, answer = std::move(answer), keep_alive]() mutable {
        self->respond(std::move(answer), keep_alive);
      });
    });
  }
  void respond(HttpAnswer answer, bool keep_alive) {
    out_ = serialize(answer, keep_alive);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), keep_alive](std::error_code ec, std::size_t) {
                        if (ec || !keep_alive) return self->close();
                        self->next();
                      });
  }
  void release() {
    state_.pending_bytes -= reserved_;
    reserved_ = 0;
  }
  void next() {
    release();
    reader_.next();
    started_ = !leftover_.empty();
    arm(started_ ? state_.limits.request_time : state_.limits.idle);
    const std::string pending = std::move(leftover_);
    leftover_.clear();
    feed(pending);
  }

  State& state_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  http::RequestReader reader_;
  std::array<char, 16 * 1024> buffer_{};
  std::string leftover_;  // bytes after the request being handled: the next one's start
  std::string out_;
  bool started_ = false;      // a request's first byte arrived
  std::size_t reserved_ = 0;  // this request's body in the state's budget
};

void WorkerHttp::State::accept() {
  // The state outlives its io thread (joined in ~WorkerHttp): handlers hold it by address.
  acceptor.async_accept([self = this](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (ec) {
      self->retry.expires_after(kAcceptRetry);
      self->retry.async_wait([self](std::error_code waited) {
        if (!waited && self->acceptor.is_open()) self->accept();
      });
      return;
    }
    if (self->connections.size() < self->limits.max_connections) {
      auto connection = std::make_shared<Connection>(*self, std::move(socket));
      self->connections.insert(connection);
      connection->start();
    } else {
      std::error_code ignored;
      socket.close(ignored);  // over the cap: a coordinator holds one connection per worker
    }
    self->accept();
  });
}

WorkerHttp::WorkerHttp(const tcp::endpoint& endpoint, Handler handler, HttpLimits limits)
    : state_(std::make_unique<State>(std::move(handler), limits)) {
  auto& acceptor = state_->acceptor;
  acceptor.open(endpoint.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  state_->accept();
  state_->io_thread = std::thread([state = state_.get()] { state->io.run(); });
  state_->handler_thread = std::thread([state = state_.get()] { state->run_jobs(); });
}

WorkerHttp::~WorkerHttp() {
  std::promise<void> closed;
  asio::post(state_->io, [state = state_.get(), &closed] {
    std::error_code ignored;
    state->acceptor.close(ignored);
    state->retry.cancel();
    const auto connections = state->connections;
    for (const auto& connection : connections) connection->close();
    closed.set_value();
  });
  closed.get_future().wait();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  state_->handler_thread.join();
  state_->io.stop();
  state_->io_thread.join();
  // Queued requests hold their connections (and those the state): dropped here, after both
  // threads, so that nothing runs on them.
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->jobs.clear();
}

tcp::endpoint WorkerHttp::local_endpoint() const {
  return state_->acceptor.local_endpoint();
}

}  // namespace polybus::bench::worker
