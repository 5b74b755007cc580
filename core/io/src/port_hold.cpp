// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/port_hold.hpp"

namespace polybus {

void PortHold::close_listener(asio::ip::tcp::acceptor& listener) {
  std::error_code ec;
  const auto endpoint = listener.local_endpoint(ec);
  std::error_code ignored;
  listener.close(ignored);
  if (!ec && endpoint.port() != 0) hold(endpoint);
}

void PortHold::hold(const asio::ip::tcp::endpoint& endpoint) {
  release();
  std::error_code ec;
  socket_.open(endpoint.protocol(), ec);
  if (!ec) socket_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) socket_.bind(endpoint, ec);
  if (ec) release();
}

std::uint16_t PortHold::port() const {
  std::error_code ec;
  const auto endpoint = socket_.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void PortHold::release() {
  std::error_code ignored;
  socket_.close(ignored);
}

}  // namespace polybus
