// SPDX-License-Identifier: Apache-2.0
// One HTTP/1.1 request on a connection of its own, read to its end: for tests of the HTTP APIs
// of nsqd and nsqlookupd (real and in-process) that compare status lines, headers and bodies.
#pragma once

#include <map>
#include <string>

namespace polybus::test {

struct HttpAnswer {
  int status = 0;  // 0: no answer (the connection failed or closed first)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  // The header's value, or "" when absent.
  std::string header(const std::string& lower_name) const;
  bool has(const std::string& lower_name) const { return headers.count(lower_name) != 0; }
};

// METHOD target (path and query) to "host:port", with the body (and its Content-Length) unless
// `body` is empty and `method` is GET.
HttpAnswer http_exchange(const std::string& address, const std::string& method,
                         const std::string& target, const std::string& body = "");

}  // namespace polybus::test
