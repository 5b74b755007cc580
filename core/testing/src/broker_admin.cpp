// SPDX-License-Identifier: Apache-2.0
#include "polybus/broker_admin.hpp"

#include <array>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <charconv>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "polybus/text/http.hpp"
#include "polybus/text/text.hpp"

namespace polybus::testing {

namespace {

using asio::ip::tcp;

constexpr std::size_t kMaxHead = 8 * 1024;
constexpr std::size_t kMaxBody = 64 * 1024;             // a fault rule's text is far less
constexpr std::chrono::seconds kExchangeBound{30};      // to send a request and take its answer
constexpr std::size_t kMaxConnections = 32;             // more are closed on arrival
constexpr std::chrono::milliseconds kAcceptRetry{100};  // after a failed accept
constexpr std::string_view kFaults = "/faults";

struct Answer {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::string allow;  // for a 405
};

Answer json(int status, std::string body) {
  return Answer{status, std::move(body) + "\n", "application/json", {}};
}

Answer message(int status, std::string_view what, std::string allow = {}) {
  std::string body = "{\"message\":";
  text::append_json_quoted(body, what);
  Answer answer = json(status, body + "}");
  answer.allow = std::move(allow);
  return answer;
}

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

Answer journal_lines(const Journal& journal, const http::Request& request) {
  if (request.method != "GET") return message(405, "GET the journal", "GET");
  std::uint64_t since = 0;
  if (const auto given = request.query_parameter("since")) {
    const auto parsed = number(*given);
    if (!parsed) return message(400, "since: not a journal sequence number");
    since = *parsed;
  }
  Answer answer{200, {}, "application/x-ndjson", {}};
  for (const auto& entry :
       journal.entries([since](const JournalEntry& e) { return e.seq > since; }))
    answer.body += Journal::json_line(entry) + "\n";
  return answer;
}

Answer faults_request(FaultRules& faults, const http::Request& request) {
  const std::string_view rest = std::string_view(request.path).substr(kFaults.size());
  if (rest.empty()) {
    if (request.method == "POST") {
      try {
        const auto id = faults.add(parse_fault_rule(request.body));
        return json(200, "{\"id\":" + std::to_string(id) + "}");
      } catch (const std::invalid_argument& e) {
        return message(400, e.what());
      }
    }
    if (request.method == "DELETE") {
      faults.clear();
      return json(200, "{}");
    }
    return message(405, "POST a rule, or DELETE them all", "POST, DELETE");
  }
  const auto id = rest.front() == '/' ? number(rest.substr(1)) : std::nullopt;
  if (!id) return message(404, "no such path");
  if (request.method == "GET")
    return json(200, "{\"id\":" + std::to_string(*id) +
                         ",\"fired\":" + std::to_string(faults.fired(*id)) + "}");
  if (request.method == "DELETE")
    return faults.remove(*id) ? json(200, "{}")
                              : message(404, "no fault rule " + std::to_string(*id));
  return message(405, "GET or DELETE a rule", "GET, DELETE");
}

Answer clock_now(const std::shared_ptr<ManualClock>& clock) {
  const auto now = clock ? clock->now() : std::chrono::steady_clock::now();
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  return json(200, std::string("{\"manual\":") + (clock ? "true" : "false") +
                       ",\"now_ns\":" + std::to_string(ns) + "}");
}

Answer clock_request(const std::shared_ptr<ManualClock>& clock, const http::Request& request) {
  if (request.path == "/clock") {
    if (request.method != "GET") return message(405, "GET the clock", "GET");
    return clock_now(clock);
  }
  if (request.path != "/clock/advance") return message(404, "no such path");
  if (request.method != "POST") return message(405, "POST to advance the clock", "POST");
  if (!clock) return message(409, "the broker's timers are on the real clock");
  const auto given = request.query_parameter("ms");
  const auto ms = given ? number(*given) : std::nullopt;
  // Past a year is a mistake, and the arithmetic stays far from overflow.
  if (!ms || *ms > 366ULL * 24 * 3600 * 1000)
    return message(400, "ms: milliseconds, at most a year");
  try {
    clock->advance(std::chrono::milliseconds(*ms));
  } catch (const std::exception& e) {
    return message(409, e.what());
  }
  return clock_now(clock);
}

std::string response_text(const Answer& answer, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(answer.status) + " " +
                    http::reason_phrase(answer.status) +
                    "\r\nContent-Type: " + answer.content_type +
                    "\r\nContent-Length: " + std::to_string(answer.body.size()) + "\r\n";
  if (!answer.allow.empty()) out += "Allow: " + answer.allow + "\r\n";
  out += keep_alive ? "\r\n" : "Connection: close\r\n\r\n";
  return out + answer.body;
}

// What the endpoint serves and its thread's state. Handlers hold it by plain pointer: it outlives
// its io_context's handlers, whose destruction (with the io_context, a member) ends them, so no
// handler keeps it alive in a cycle.
struct AdminCore {
  AdminCore(Journal& journal, FaultRules& faults, std::shared_ptr<ManualClock> clock)
      : journal(journal), faults(faults), clock(std::move(clock)) {}

  Answer answer(const http::Request& request) {
    if (request.path == "/journal") return journal_lines(journal, request);
    if (request.path.compare(0, kFaults.size(), kFaults) == 0 &&
        (request.path.size() == kFaults.size() || request.path[kFaults.size()] == '/'))
      return faults_request(faults, request);
    if (request.path == "/clock" || request.path.rfind("/clock/", 0) == 0)
      return clock_request(clock, request);
    return message(404, "no such path: /journal, /faults and /clock are served here");
  }

  void accept();

  Journal& journal;
  FaultRules& faults;
  std::shared_ptr<ManualClock> clock;
  std::size_t open = 0;  // connections alive (io thread); before io: handlers count down on it
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  std::thread thread;
};

// One client connection, one request: bounded in head, body and time. An advance of the clock is
// answered once what came due ran on the broker's thread.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(tcp::socket socket, AdminCore& server)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server) {
    ++server_.open;
  }
  ~Exchange() { --server_.open; }

  void start() {
    timer_.expires_after(kExchangeBound);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
    read();
  }

 private:
  void read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->finish();
                              self->pending_.append(self->buffer_.data(), n);
                              self->take();
                            });
  }

  void take() {
    const auto result = reader_.feed(pending_);
    pending_.erase(0, result.consumed);
    switch (result.status) {
      case http::RequestReader::Status::need_more:
        return read();
      case http::RequestReader::Status::head_ready:
        return take();
      case http::RequestReader::Status::error:
        return send(message(result.error_status, "a request this endpoint does not take"), false);
      case http::RequestReader::Status::request_ready: {
        // One request per connection: nothing stays open between a test's calls.
        return send(server_.answer(reader_.request()), false);
      }
    }
  }

  void send(const Answer& answer, bool keep_alive) {
    out_ = response_text(answer, keep_alive);
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = shared_from_this()](std::error_code, std::size_t) { self->finish(); });
  }

  void finish() {
    std::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  AdminCore& server_;
  http::RequestReader reader_{kMaxHead, kMaxBody};
  std::array<char, 4096> buffer_{};
  std::string pending_;
  std::string out_;
};

void AdminCore::accept() {
  acceptor.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      retry.expires_after(kAcceptRetry);
      retry.async_wait([this](std::error_code waited) {
        if (!waited && acceptor.is_open()) accept();
      });
      return;
    }
    if (open < kMaxConnections) {
      std::make_shared<Exchange>(std::move(socket), *this)->start();
    } else {
      std::error_code ignored;
      socket.close(ignored);
    }
    accept();
  });
}

}  // namespace

struct BrokerAdmin::Server : AdminCore {
  using AdminCore::AdminCore;
};

BrokerAdmin::BrokerAdmin(const std::string& host, std::uint16_t port, Journal& journal,
                         FaultRules& faults, std::shared_ptr<ManualClock> clock)
    : server_(std::make_unique<Server>(journal, faults, std::move(clock))) {
  std::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  const std::string where = host + ":" + std::to_string(port);
  if (ec) throw std::system_error(ec, "admin endpoint: not an IP address: " + host);
  const tcp::endpoint endpoint(address, port);
  auto& acceptor = server_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::system_error(ec, "admin endpoint: cannot listen on " + where);
  server_->accept();
  server_->thread = std::thread([server = server_.get()] { server->io.run(); });
}

BrokerAdmin::~BrokerAdmin() {
  asio::post(server_->io, [server = server_.get()] {
    std::error_code ignored;
    server->acceptor.close(ignored);
    server->retry.cancel();
    server->io.stop();
  });
  server_->thread.join();
}

std::uint16_t BrokerAdmin::port() const {
  return server_->acceptor.local_endpoint().port();
}

std::string BrokerAdmin::address() const {
  const auto endpoint = server_->acceptor.local_endpoint();
  const std::string host = endpoint.address().to_string();
  return (endpoint.address().is_v6() ? "[" + host + "]" : host) + ":" +
         std::to_string(endpoint.port());
}

}  // namespace polybus::testing
