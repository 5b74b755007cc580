// SPDX-License-Identifier: Apache-2.0
#include "http_exchange.hpp"

#include "polybus/text/http.hpp"
#include "polybus/url.hpp"

namespace polybus::quickio::detail {

std::string new_session_id(std::mt19937_64& random) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string sid;
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = random();
    for (int i = 0; i < 16; ++i, bits >>= 4) sid.push_back(kHex[bits & 0xF]);
  }
  return sid;
}

std::string make_poll_request(std::string_view host, std::string_view path, std::string_view sid,
                              bool connect, std::string_view body) {
  std::string out;
  out.reserve(160 + body.size());
  out.append("POST ").append(path.empty() ? "/" : path).append("?sid=").append(sid);
  if (connect) out.append("&connect=true");
  out.append(" HTTP/1.1\r\nHost: ").append(host);
  out.append("\r\nContent-Type: text/plain\r\nContent-Length: ");
  out.append(std::to_string(body.size())).append("\r\n\r\n").append(body);
  return out;
}

int http_status_of(std::string_view status_line) {
  const int status = http::status_of(status_line);
  // 511 is the last status websocketpp's enum holds; 512-599 are unassigned in HTTP anyway.
  return status <= 511 ? status : -1;
}

bool parse_host_answer(std::string_view address, HostAnswer& out) {
  if (address.empty()) return false;
  try {
    std::string text(address);
    Url url = Url::parse(text.find("://") == std::string::npos ? "http://" + text : text);
    if (url.hosts.size() != 1 || url.hosts.front().host.empty()) return false;
    out.host = url.hosts.front().host;
    out.port = url.hosts.front().port;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace polybus::quickio::detail
