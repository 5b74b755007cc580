// SPDX-License-Identifier: Apache-2.0
// Keeps the TCP port of a stopped in-process broker for its restart. Closing a listener frees its
// port, and on a busy host another socket can take it before the broker listens again: another
// test's bind to port 0, or a client that keeps reconnecting and is given that port for its own
// end (on localhost a connect can meet itself). While held, the port is bound by a socket that
// does not listen: connections are refused, as by a stopped server, and the kernel gives the port
// to no one else. The broker's listener binds beside the hold (both reuse addresses; Linux allows
// that while the hold does not listen), listens, and then lets the hold go.
#pragma once

#include "polybus/export.hpp"

#include <asio/ip/tcp.hpp>
#include <cstdint>

namespace polybus {

class POLYBUS_API PortHold {
 public:
  explicit PortHold(asio::io_context& io) : socket_(io) {}

  // Closes `listener` and holds the port it listened on.
  void close_listener(asio::ip::tcp::acceptor& listener);
  // Holds `endpoint`'s port (port 0: a free one, see port()). Holds nothing when that fails (the
  // port is taken already): the broker's next listen then names the port.
  void hold(const asio::ip::tcp::endpoint& endpoint);
  // Lets the port go: call once the broker listens on it again.
  void release();

  // The port held; 0 when none is.
  std::uint16_t port() const;

 private:
  asio::ip::tcp::acceptor socket_;  // bound, never listening
};

}  // namespace polybus
