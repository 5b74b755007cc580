// SPDX-License-Identifier: Apache-2.0
#include "polybus/tools/metrics_endpoint.hpp"

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/write.hpp>
#include <iostream>
#include <thread>

#include "polybus/tools/args.hpp"
#include "polybus/tools/listen_address.hpp"

namespace polybus::cli {

namespace {

using asio::ip::tcp;

constexpr std::size_t kMaxRequestHead = 8192;        // a scrape's request line and headers
constexpr std::chrono::seconds kRequestTimeout{10};  // to send them, and to take the answer
// Scrapes served at once; more are closed on arrival. A scraper opens one at a time: this bounds
// what a flood of connections can make the process hold (sockets, buffers, metrics texts).
constexpr std::size_t kMaxExchanges = 32;
// After a failed accept (out of descriptors, say) the next waits this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetry{100};

std::string http_response(const char* status, std::string_view content_type, std::string body) {
  std::string out = std::string("HTTP/1.1 ") + status + "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  out += body;
  return out;
}

// One scrape: read the head (bounded in size and time), answer, close.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(tcp::socket socket, const MetricsEndpoint::Render& render, std::size_t& open)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        head_(kMaxRequestHead),
        render_(render),
        open_(open) {
    ++open_;
  }
  ~Exchange() { --open_; }

  void start() {
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
    asio::async_read_until(
        socket_, head_, "\r\n\r\n",
        [self = shared_from_this()](std::error_code ec, std::size_t) { self->answer(ec); });
  }

 private:
  void answer(std::error_code ec) {
    if (ec == asio::error::not_found) {
      response_ = http_response("431 Request Header Fields Too Large", "text/plain", "");
    } else if (ec) {
      timer_.cancel();
      return;
    } else {
      std::string line(asio::buffers_begin(head_.data()), asio::buffers_end(head_.data()));
      line = line.substr(0, line.find("\r\n"));
      const auto first_space = line.find(' ');
      const std::string method = line.substr(0, first_space);
      std::string target =
          first_space == std::string::npos
              ? ""
              : line.substr(first_space + 1, line.find(' ', first_space + 1) - first_space - 1);
      target = target.substr(0, target.find('?'));
      if (method != "GET" && method != "HEAD") {
        response_ = http_response("405 Method Not Allowed", "text/plain", "use GET\n");
      } else if (target != "/metrics") {
        response_ = http_response("404 Not Found", "text/plain", "metrics are at /metrics\n");
      } else {
        std::string body;
        render_(body);
        response_ = http_response("200 OK", metrics::kPrometheusContentType, std::move(body));
        if (method == "HEAD") response_.resize(response_.find("\r\n\r\n") + 4);
      }
    }
    asio::async_write(socket_, asio::buffer(response_),
                      [self = shared_from_this()](std::error_code, std::size_t) {
                        std::error_code ignored;
                        self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
                        self->socket_.close(ignored);
                        self->timer_.cancel();
                      });
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf head_;
  std::string response_;
  const MetricsEndpoint::Render& render_;
  std::size_t& open_;  // the server's count of exchanges (its io thread only)
};

}  // namespace

struct MetricsEndpoint::Server {
  explicit Server(Render render) : render(std::move(render)) {}
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  Render render;
  std::size_t open = 0;  // exchanges alive (io thread)
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](std::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        retry.expires_after(kAcceptRetry);
        retry.async_wait([this](std::error_code waited) {
          if (!waited && acceptor.is_open()) accept();
        });
        return;
      }
      if (open < kMaxExchanges) {
        std::make_shared<Exchange>(std::move(socket), render, open)->start();
      } else {
        std::error_code ignored;
        socket.close(ignored);  // over the cap: the scraper tries again at its next interval
      }
      accept();
    });
  }
};

MetricsEndpoint::MetricsEndpoint(const std::string& host_port, Render render)
    : server_(std::make_shared<Server>(std::move(render))) {
  const tcp::endpoint endpoint = listen_endpoint("--metrics", host_port);
  std::error_code ec;
  auto& acceptor = server_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot serve metrics on " + host_port + ": " + ec.message());
  server_->accept();
  server_->thread = std::thread([server = server_] { server->io.run(); });
  std::cerr << "metrics: http://" << address() << "/metrics" << std::endl;
}

MetricsEndpoint::~MetricsEndpoint() {
  asio::post(server_->io, [server = server_] {
    std::error_code ignored;
    server->acceptor.close(ignored);
    server->retry.cancel();
    server->io.stop();
  });
  server_->thread.join();
}

std::string MetricsEndpoint::address() const {
  return endpoint_text(server_->acceptor.local_endpoint());
}

std::unique_ptr<MetricsEndpoint> metrics_endpoint_if_asked(const Args& args,
                                                           MetricsEndpoint::Render render) {
  const auto where = args.value("metrics");
  if (!where) return nullptr;
  return std::make_unique<MetricsEndpoint>(*where, std::move(render));
}

std::unique_ptr<MetricsEndpoint> metrics_endpoint_if_asked(const Args& args, const Client& client) {
  return metrics_endpoint_if_asked(
      args, [&client](std::string& body) { metrics::write_prometheus(body, {client.metrics()}); });
}

}  // namespace polybus::cli
