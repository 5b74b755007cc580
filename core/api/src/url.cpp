// SPDX-License-Identifier: Apache-2.0
#include "polybus/url.hpp"

#include <charconv>

#include "polybus/error.hpp"
#include "polybus/text/text.hpp"

namespace polybus {
namespace {

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw Error(errc::invalid_url, "invalid URL '" + std::string(text) + "': " + why);
}

std::string percent_decode(std::string_view url, std::string_view in) {
  std::string out;
  const text::PercentError error = text::percent_decode(in, out, true);
  if (error != text::PercentError::none) bad(url, text::describe(error));
  return out;
}

HostPort parse_host(std::string_view url, std::string_view item) {
  HostPort hp;
  std::string_view port_text;
  if (!item.empty() && item[0] == '[') {
    auto close = item.find(']');
    if (close == std::string_view::npos) bad(url, "unterminated '[' in host");
    hp.host = std::string(item.substr(1, close - 1));
    std::string_view rest = item.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') bad(url, "expected ':' after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) bad(url, "empty port");
    }
  } else {
    auto colon = item.rfind(':');
    if (colon != std::string_view::npos) {
      hp.host = std::string(item.substr(0, colon));
      port_text = item.substr(colon + 1);
      if (port_text.empty()) bad(url, "empty port");
    } else {
      hp.host = std::string(item);
    }
  }
  if (hp.host.empty()) bad(url, "empty host");
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535)
      bad(url, "port '" + std::string(port_text) + "' is not in [1, 65535]");
    hp.port = static_cast<std::uint16_t>(value);
  }
  return hp;
}

}  // namespace

std::string HostPort::to_string() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port ? h + ":" + std::to_string(port) : h;
}

Url Url::parse(std::string_view text) {
  Url url;
  auto sep = text.find("://");
  if (sep == std::string_view::npos || sep == 0) bad(text, "expected scheme://");
  url.scheme = std::string(text.substr(0, sep));
  for (char c : url.scheme) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (!ok) bad(text, "scheme must be lower-case letters, digits, '+', '-' or '.'");
  }
  std::string_view rest = text.substr(sep + 3);
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view authority = rest;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    url.path = std::string(rest.substr(slash));
  }
  while (!authority.empty()) {
    auto comma = authority.find(',');
    std::string_view item = authority.substr(0, comma);
    url.hosts.push_back(parse_host(text, item));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
    if (authority.empty()) bad(text, "trailing ',' in host list");
  }
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      auto eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0)
        bad(text, "query parameter '" + std::string(pair) + "' must be key=value");
      std::string key = percent_decode(text, pair.substr(0, eq));
      if (url.query.values().count(key)) bad(text, "query parameter '" + key + "' given twice");
      url.query.set(key, percent_decode(text, pair.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return url;
}

std::vector<HostPort> Url::hosts_or_throw(std::uint16_t default_port) const {
  if (hosts.empty())
    throw Error(errc::invalid_url,
                scheme + ": URL names no host (expected " + scheme + "://host:port)");
  std::vector<HostPort> out = hosts;
  for (auto& hp : out)
    if (hp.port == 0) hp.port = default_port;
  return out;
}

}  // namespace polybus
