// SPDX-License-Identifier: Apache-2.0
#include "http_server.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <cctype>
#include <ctime>
#include <deque>
#include <vector>

namespace polybus::nsq::testing::detail {
namespace {

// Go's net/http status texts (http.StatusText), which nsqd and nsqlookupd send: RFC 9110's but
// for 413, where Go keeps RFC 7231's.
const char* reason(int status) {
  return status == 413 ? "Request Entity Too Large" : polybus::http::reason_phrase(status);
}

std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

std::string serialize(const HttpResponse& response, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status) + "\r\n";
  if (!response.content_type.empty()) out += "Content-Type: " + response.content_type + "\r\n";
  if (!response.allow.empty()) out += "Allow: " + response.allow + "\r\n";
  if (response.nsq_content_type) out += "X-Nsq-Content-Type: nsq; version=1.0\r\n";
  out += "Date: " + http_date() + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += response.body;
  return out;
}

constexpr const char* kJson = "application/json; charset=utf-8";

}  // namespace

HttpResponse v1_error(int status, const std::string& message) {
  // The texts are nsqd's own upper-case codes: nothing to escape.
  return HttpResponse{status, kJson, true, "{\"message\":\"" + message + "\"}", {}};
}

HttpResponse v1_json(std::string json) {
  return HttpResponse{200, kJson, true, std::move(json), {}};
}

HttpResponse v1_text(std::string text) {
  return HttpResponse{200, "text/plain; charset=utf-8", true, std::move(text), {}};
}

HttpResponse v1_empty() {
  return HttpResponse{200, {}, true, {}, {}};
}

HttpResponse v1_method_not_allowed(std::string allow) {
  HttpResponse refused = v1_error(405, "METHOD_NOT_ALLOWED");
  refused.allow = std::move(allow);
  return refused;
}

class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer& server, asio::ip::tcp::socket socket, std::uint64_t id)
      : server_(server),
        socket_(std::move(socket)),
        hold_timer_(socket_.get_executor()),
        id_(id),
        buffer_(16 * 1024),
        reader_(kMaxHead, server.max_body_) {}

  void start() { read(); }

  void close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    hold_timer_.cancel();
    server_.listener_->forget(id_);
  }

 private:
  static constexpr std::size_t kMaxHead = 16 * 1024;
  static constexpr std::size_t kMaxQueuedResponses = 64;

  void read() {
    if (closed_ || closing_ || reading_ || queue_.size() >= kMaxQueuedResponses) return;
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(buffer_),
        [self = shared_from_this()](std::error_code ec, std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(std::error_code ec, std::size_t size) {
    reading_ = false;
    if (closed_) return;
    if (ec) return close();
    std::string_view input(buffer_.data(), size);
    // Until the reader wants more: a request without a body is ready with no further byte.
    while (!closing_) {
      const http::RequestReader::Result result = reader_.feed(input);
      input.remove_prefix(result.consumed);
      if (result.status == http::RequestReader::Status::need_more) break;
      if (result.status == http::RequestReader::Status::head_ready) {
        if (reader_.request().chunked) {
          refuse(501);  // bodies come with a Content-Length here
          break;
        }
        if (server_.handlers_.before_body) {
          if (auto refused = server_.handlers_.before_body(reader_.request())) {
            send(*refused, false);
            break;
          }
        }
        continue;
      }
      if (result.status == http::RequestReader::Status::error) {
        std::optional<HttpResponse> answer;
        if (result.error_status == 413 && server_.handlers_.too_large) {
          answer = server_.handlers_.too_large(reader_.request());
        }
        if (answer) {
          send(*answer, false);
        } else {
          refuse(result.error_status);
        }
        break;
      }
      const bool go_on = answer(reader_.request());
      reader_.next();
      if (!go_on) return;
    }
    read();
  }

  // Answers a request, as a fault rule says if one fires; false when nothing more is read.
  bool answer(const http::Request& request) {
    using Action = polybus::testing::FaultRule::Action;
    const Handlers& handlers = server_.handlers_;
    const bool journaled = handlers.journal != nullptr && handlers.journal->enabled();
    std::string topic, channel;
    if (journaled || (handlers.faults != nullptr && !handlers.faults->empty())) {
      topic = request.query_parameter("topic").value_or("");
      channel = request.query_parameter("channel").value_or("");
    }
    if (journaled) {
      polybus::testing::JournalEntry entry;
      entry.connection = id_;
      entry.kind = request.path;
      entry.topic = topic;
      entry.channel = channel;
      entry.bytes = request.body.size();
      entry.text = request.method + (request.query.empty() ? "" : " ?" + request.query);
      handlers.journal->record(std::move(entry));
    }
    std::optional<polybus::testing::FaultRule> fault;
    if (handlers.faults != nullptr && !handlers.faults->empty())
      fault = handlers.faults->fire({request.path, topic, channel, id_});
    if (!fault) {
      send_journaled(handlers.respond(request), request.keep_alive(), topic);
      return true;
    }
    switch (fault->action) {
      case Action::error: {
        const auto answer = polybus::testing::fault_status(fault->error);
        send_journaled(v1_error(answer.status, std::string(answer.text)),
                       request.keep_alive() && !fault->fatal, topic);
        return !fault->fatal;
      }
      case Action::swallow:
        closing_ = true;  // no answer, and nothing more read: the client's own timeout decides
        return false;
      case Action::delay:
        hold(fault->delay);
        send_journaled(handlers.respond(request), request.keep_alive(), topic);
        return true;
      case Action::hold:
        hold(std::chrono::hours(24 * 365));  // until the rule is removed
        handlers.faults->when_removed(fault->id, id_,
                                      [weak = weak_from_this(), executor = socket_.get_executor()] {
                                        asio::post(executor, [weak] {
                                          if (const auto self = weak.lock())
                                            self->hold(std::chrono::milliseconds(0));
                                        });
                                      });
        send_journaled(handlers.respond(request), request.keep_alive(), topic);
        return true;
      case Action::close:
        close();
        return false;
      case Action::reset: {
        std::error_code ignored;
        socket_.set_option(asio::socket_base::linger(true, 0), ignored);
        close();
        return false;
      }
      case Action::duplicate:
        handlers.respond(request);  // carried out twice, answered once
        send_journaled(handlers.respond(request), request.keep_alive(), topic);
        return true;
    }
    return true;
  }

  void send_journaled(const HttpResponse& response, bool keep_alive, const std::string& topic) {
    polybus::testing::Journal* journal = server_.handlers_.journal;
    if (journal != nullptr && journal->enabled()) {
      polybus::testing::JournalEntry entry;
      entry.connection = id_;
      entry.received = false;
      entry.kind = "response";
      entry.topic = topic;
      entry.count = response.status;
      entry.bytes = response.body.size();
      journal->record(std::move(entry));
    }
    send(response, keep_alive);
  }

  // A delay fault: what is queued and what comes next waits `delay`.
  void hold(std::chrono::milliseconds delay) {
    held_ = true;
    hold_timer_.expires_after(delay);
    hold_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;  // cancelled by a later delay
      self->held_ = false;
      self->write();
    });
  }

  // Answers what the reader refused, as Go's net/http does, and closes.
  void refuse(int status) {
    const std::string text = std::to_string(status) + " " + reason(status);
    send(HttpResponse{status, "text/plain; charset=utf-8", false, text, {}}, false);
  }

  void send(const HttpResponse& response, bool keep_alive) {
    if (!keep_alive) closing_ = true;
    queue_.push_back(serialize(response, keep_alive));
    write();
  }

  void write() {
    if (writing_ || held_ || queue_.empty() || closed_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](std::error_code ec, std::size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        self->queue_.pop_front();
                        if (ec) return self->close();
                        if (!self->queue_.empty()) return self->write();
                        if (self->closing_) return self->close();
                        self->read();
                      });
  }

  HttpServer& server_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer hold_timer_;
  bool held_ = false;  // a delay fault holds the output
  std::uint64_t id_;
  std::vector<char> buffer_;
  http::RequestReader reader_;
  std::deque<std::string> queue_;
  bool reading_ = false;
  bool writing_ = false;
  bool closing_ = false;  // answer what is queued, then close
  bool closed_ = false;
};

HttpServer::HttpServer(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint,
                       std::size_t max_body, Handlers handlers)
    : max_body_(max_body), handlers_(std::move(handlers)) {
  listener_ = std::make_unique<ConnectionListener<Connection>>(
      io, endpoint, [this](asio::ip::tcp::socket socket, std::uint64_t id) {
        return std::make_shared<Connection>(*this, std::move(socket), id);
      });
}

HttpServer::~HttpServer() {
  close();
}

void HttpServer::close() {
  listener_->close();
}

}  // namespace polybus::nsq::testing::detail
