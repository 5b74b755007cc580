// SPDX-License-Identifier: Apache-2.0
// The test nsqd's side of nsqlookupd's TCP protocol: one connection to one nsqlookupd, as
// nsqd's lookupPeer keeps it. Commands go one at a time, each waiting for its size-prefixed
// answer; a new connection begins with the magic, IDENTIFY and a REGISTER of everything the
// nsqd has, so commands while disconnected are dropped. A failed connection is made again by
// start() only, which the nsqd calls at each ping (every 15 s by default): attempts are paced,
// however often topics change. Runs on the nsqd's io thread.
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace polybus::nsq::testing::detail {

class LookupdPeer : public std::enable_shared_from_this<LookupdPeer> {
 public:
  struct Callbacks {
    std::function<std::string()> identify_body;               // the IDENTIFY JSON
    std::function<std::vector<std::string>()> registrations;  // "REGISTER t c\n" lines
    std::function<void(const std::string&)> report;           // why a connection failed
  };

  LookupdPeer(asio::io_context& io, std::string address, Callbacks callbacks);

  const std::string& address() const { return address_; }
  // The nsqlookupd's HTTP address, broadcast_address:http_port from its IDENTIFY answer; empty
  // until it answered.
  const std::string& http_address() const { return http_address_; }
  // A command line ("PING\n", "REGISTER t\n"...), sent if connected, dropped if not.
  void command(std::string line);
  // Connects, if neither connected nor connecting.
  void start() {
    if (state_ == State::disconnected) connect();
  }
  void close();

 private:
  void connect();
  void on_connected(std::error_code ec);
  void write_next();
  void read_answer();
  // Drops the connection, saying why through Callbacks::report.
  void fail(const std::string& why);
  void learn_http_address();

  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;
  std::string address_;
  Callbacks callbacks_;
  enum class State { disconnected, connecting, connected, closed } state_ = State::disconnected;
  std::deque<std::string> queue_;
  bool busy_ = false;  // a command is on the wire, its answer not read yet
  std::string header_;
  std::string answer_;
  std::string http_address_;
  std::uint64_t generation_ = 0;  // a callback of an earlier connection is dropped
};

}  // namespace polybus::nsq::testing::detail
