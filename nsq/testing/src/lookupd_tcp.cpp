// SPDX-License-Identifier: Apache-2.0
#include "lookupd_tcp.hpp"

#include <asio/write.hpp>
#include <deque>
#include <vector>

#include "lookup_v1_session.hpp"
#include "nsqd_server.hpp"

namespace polybus::nsq::testing::detail {

class LookupdTcpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(LookupdTcpServer& server, asio::ip::tcp::socket socket, std::uint64_t id,
             LookupdIdentity identity)
      : server_(server),
        socket_(std::move(socket)),
        id_(id),
        buffer_(16 * 1024),
        session_(*server.registry_, remote_of(socket_), std::move(identity)) {}

  void start() { read(); }

  void close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    // nsqlookupd takes a producer out of every registration when its connection ends.
    if (session_.identified()) server_.registry_->remove_producer(session_.peer_address());
    server_.listener_->forget(id_);
  }

 private:
  static std::string remote_of(const asio::ip::tcp::socket& socket) {
    std::error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    return ec ? std::string() : remote.address().to_string() + ":" + std::to_string(remote.port());
  }

  void read() {
    if (closed_ || session_.ended()) return;
    socket_.async_read_some(
        asio::buffer(buffer_), [self = shared_from_this()](std::error_code ec, std::size_t n) {
          if (self->closed_) return;
          if (ec) return self->close();
          std::string answers;
          self->session_.feed(std::string_view(self->buffer_.data(), n), answers);
          if (!answers.empty()) self->send(std::move(answers));
          self->read();
        });
  }

  void send(std::string bytes) {
    queue_.push_back(std::move(bytes));
    write();
  }

  void write() {
    if (writing_ || queue_.empty() || closed_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](std::error_code ec, std::size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        self->queue_.pop_front();
                        if (ec) return self->close();
                        if (!self->queue_.empty()) return self->write();
                        // An error was the last answer: nsqlookupd closes after it.
                        if (self->session_.ended()) return self->close();
                      });
  }

  LookupdTcpServer& server_;
  asio::ip::tcp::socket socket_;
  std::uint64_t id_;
  std::vector<char> buffer_;
  LookupV1Session session_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool closed_ = false;
};

LookupdTcpServer::LookupdTcpServer(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint,
                                   std::shared_ptr<LookupRegistry> registry,
                                   std::string broadcast_address)
    : registry_(std::move(registry)), broadcast_address_(std::move(broadcast_address)) {
  listener_ = std::make_unique<ConnectionListener<Connection>>(
      io, endpoint, [this](asio::ip::tcp::socket socket, std::uint64_t id) {
        return std::make_shared<Connection>(
            *this, std::move(socket), id,
            LookupdIdentity{broadcast_address_, host_name(), port(), http_port_});
      });
}

LookupdTcpServer::~LookupdTcpServer() {
  close();
}

void LookupdTcpServer::close() {
  listener_->close();
}

}  // namespace polybus::nsq::testing::detail
