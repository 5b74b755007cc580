// SPDX-License-Identifier: Apache-2.0
// A TCP listener and the connections it accepted, for the test nsqd's HTTP API and the test
// nsqlookupd's HTTP and TCP servers: binds and listens at once (throwing std::system_error),
// sets TCP_NODELAY on each connection (their answers are small and one at a time), keeps each
// by id until it forgets itself, and closes them all with the listener. Connection needs
// start() and close(); make builds one for an accepted socket. On the io thread throughout.
#pragma once

#include <asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

namespace polybus::nsq::testing::detail {

template <typename Connection>
class ConnectionListener {
 public:
  using Make =
      std::function<std::shared_ptr<Connection>(asio::ip::tcp::socket socket, std::uint64_t id)>;

  ConnectionListener(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint, Make make)
      : acceptor_(io), make_(std::move(make)) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept();
  }
  ~ConnectionListener() {
    close();
    *alive_ = false;
  }
  ConnectionListener(const ConnectionListener&) = delete;
  ConnectionListener& operator=(const ConnectionListener&) = delete;

  std::uint16_t port() const { return port_; }
  // A connection that closed by itself.
  void forget(std::uint64_t id) { connections_.erase(id); }
  void close() {
    std::error_code ignored;
    acceptor_.close(ignored);
    const auto connections = connections_;  // closing one calls forget()
    for (const auto& [id, connection] : connections) connection->close();
    connections_.clear();
  }

 private:
  void accept() {
    // An accept that completed before the listener went still runs: it finds it gone.
    acceptor_.async_accept(
        [this, alive = alive_](std::error_code ec, asio::ip::tcp::socket socket) {
          if (!*alive) return;
          if (ec) {
            if (ec != asio::error::operation_aborted && acceptor_.is_open()) accept();
            return;
          }
          socket.set_option(asio::ip::tcp::no_delay(true), ec);
          const std::uint64_t id = ++next_id_;
          auto connection = make_(std::move(socket), id);
          connections_.emplace(id, connection);
          connection->start();
          accept();
        });
  }

  asio::ip::tcp::acceptor acceptor_;
  Make make_;
  std::uint16_t port_ = 0;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once it is destroyed
};

}  // namespace polybus::nsq::testing::detail
