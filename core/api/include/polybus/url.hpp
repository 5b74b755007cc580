// Broker URLs: scheme://host[:port][,host[:port]...][/path][?key=value&...]
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/options.hpp"

namespace polybus {

struct HostPort {
  std::string host;  // without brackets for IPv6 literals
  std::uint16_t port = 0;  // 0 when the URL gave none
  std::string to_string() const;
};

struct Url {
  std::string scheme;
  std::vector<HostPort> hosts;  // mem://name gives one host "name"; empty for ipc:///path
  std::string path;             // "" or begins with '/'
  Options query;                // percent-decoded

  // Throws polybus::Error(errc::invalid_url) with a message naming the problem.
  static Url parse(std::string_view text);

  // The hosts, with default_port where the URL gave none; errors if none was given at all.
  std::vector<HostPort> hosts_or_throw(std::uint16_t default_port) const;
};

}  // namespace polybus
