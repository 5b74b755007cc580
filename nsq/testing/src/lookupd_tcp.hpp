// SPDX-License-Identifier: Apache-2.0
// The test nsqlookupd's TCP listener: a connection per nsqd, each running a LookupV1Session
// (nsqlookupd's TCP protocol) and closing after an error's answer is written. A closed connection
// takes its producer out of every registration. Runs on the Lookupd's io thread.
#pragma once

#include <asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "connection_listener.hpp"
#include "lookup_registry.hpp"

namespace polybus::nsq::testing::detail {

class LookupdTcpServer {
 public:
  // Binds and listens at once (throws std::system_error). `identity` is the IDENTIFY answer's
  // own fields: broadcast_address, hostname, tcp and http ports.
  LookupdTcpServer(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint,
                   std::shared_ptr<LookupRegistry> registry, std::string broadcast_address);
  ~LookupdTcpServer();
  LookupdTcpServer(const LookupdTcpServer&) = delete;
  LookupdTcpServer& operator=(const LookupdTcpServer&) = delete;

  std::uint16_t port() const { return listener_->port(); }
  void set_http_port(std::uint16_t port) { http_port_ = port; }
  void close();

 private:
  class Connection;

  std::shared_ptr<LookupRegistry> registry_;
  std::string broadcast_address_;
  std::uint16_t http_port_ = 0;
  std::unique_ptr<ConnectionListener<Connection>> listener_;  // last: closed first
};

}  // namespace polybus::nsq::testing::detail
