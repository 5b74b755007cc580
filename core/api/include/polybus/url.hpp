// SPDX-License-Identifier: Apache-2.0
// Broker URLs: scheme://host[:port][,host[:port]...][/path][?key=value&...]
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/options.hpp"

namespace polybus {

/// One host of a URL, with its port.
struct POLYBUS_API HostPort {
  std::string host;        ///< without brackets for IPv6 literals
  std::uint16_t port = 0;  ///< 0 when the URL gave none
  /// "host:port" ("[host]:port" for an IPv6 literal); just the host when the port is 0.
  std::string to_string() const;
};

/// A broker URL, taken apart.
struct POLYBUS_API Url {
  std::string scheme;           ///< lower-case letters, digits, '+', '-' and '.'
  std::vector<HostPort> hosts;  ///< mem://name gives one host "name"; empty for ipc:///path
  std::string path;             ///< "" or begins with '/'
  Options query;                ///< percent-decoded

  /// Throws polybus::Error(errc::invalid_url) with a message naming the problem.
  static Url parse(std::string_view text);

  /// The hosts, with default_port where the URL gave none. Throws
  /// polybus::Error(errc::invalid_url) when it names no host at all.
  std::vector<HostPort> hosts_or_throw(std::uint16_t default_port) const;
};

}  // namespace polybus
