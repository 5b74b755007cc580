// SPDX-License-Identifier: Apache-2.0
#include "polybus/tools/listen_address.hpp"

#include "polybus/tools/args.hpp"

namespace polybus::cli {

asio::ip::tcp::endpoint listen_endpoint(const std::string& flag, const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    throw UsageError(flag + " wants HOST:PORT, got '" + host_port + "'");
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(host_port.substr(colon + 1), &used);
    if (used != host_port.size() - colon - 1 || port > 65535) throw std::invalid_argument("port");
  } catch (const std::exception&) {
    throw UsageError(flag + ": '" + host_port.substr(colon + 1) + "' is not a port");
  }
  std::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) throw UsageError(flag + ": '" + host + "' is not an IP address");
  return asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(port));
}

std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint) {
  const auto host = endpoint.address().to_string();
  return (endpoint.address().is_v6() ? "[" + host + "]" : host) + ":" +
         std::to_string(endpoint.port());
}

}  // namespace polybus::cli
