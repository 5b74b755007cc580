// SPDX-License-Identifier: Apache-2.0
// nsqd 1.3's HTTP API for the test nsqd: the routes of nsqd's http.go with their status codes,
// error texts and bodies (docs/testing.md lists them, and what differs). Runs on the server's io
// thread, beside the TCP connections, so a request sees the broker as a command would.
#pragma once

#include <cstddef>

#include "http_server.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing::detail {

class NsqdServer;

// The most a request body may hold: nsqd's largest, an /mpub of max_body_size.
std::size_t http_body_limit(const NsqdOptions& options);
HttpServer::Handlers http_handlers(NsqdServer& server);

}  // namespace polybus::nsq::testing::detail
