// SPDX-License-Identifier: Apache-2.0
// A HOST:PORT a command listens on (--metrics, --listen): an IP address (IPv6 in brackets) and
// a port, 0 for any free one.
#pragma once

#include <asio/ip/tcp.hpp>
#include <string>

namespace polybus::cli {

// Throws UsageError naming `flag` for anything else.
asio::ip::tcp::endpoint listen_endpoint(const std::string& flag, const std::string& host_port);

// host:port of a bound endpoint, IPv6 in brackets.
std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint);

}  // namespace polybus::cli
