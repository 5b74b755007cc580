// SPDX-License-Identifier: Apache-2.0
// GET requests to nsqlookupd's HTTP API over the core transport, one connection per request.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "polybus/io/transport.hpp"

namespace polybus::nsq {

struct HttpResult {
  std::error_code ec;
  int status = 0;
  std::string body;
  std::string detail;
};

// done runs on the strand exactly once, by the deadline at the latest.
void http_get(const std::shared_ptr<const AdapterContext>& context,
              const TransportSettings& settings, const HostPort& server, const std::string& target,
              std::chrono::milliseconds timeout, std::function<void(HttpResult)> done);

// An answer with some malformed producer entries is used for its good ones; the bad ones are
// said in these words.
std::string skipped_producers_text(const HostPort& lookupd, std::size_t rejected, std::size_t used);

}  // namespace polybus::nsq
