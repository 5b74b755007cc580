// SPDX-License-Identifier: Apache-2.0
// HTTP long polling's requests, sans I/O: the POSTs (sid, connect=true on the first); the
// responses are read by core's http::ResponseReader. And the status check that the WebSocket
// upgrade makes before websocketpp's parser sees the line.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::quickio::detail {

// 128 random bits as 32 lowercase hex digits.
std::string new_session_id(std::mt19937_64& random);

// POST <path>?sid=<sid>[&connect=true] with a text/plain body.
std::string make_poll_request(std::string_view host, std::string_view path, std::string_view sid,
                              bool connect, std::string_view body);

// The status of an HTTP/1.x status line ("HTTP/1.1 101 Switching Protocols\r\n"), 100 to 511;
// -1 for anything else. Checked before websocketpp's parser sees the line: it keeps the status
// in an enum of 0-511, and another number is undefined behaviour in it.
int http_status_of(std::string_view status_line);

// The server's address in the answer to /qio/hostname: "host", "host:port" or a URL.
struct HostAnswer {
  std::string host;
  std::uint16_t port = 0;  // 0: keep the current one
};
bool parse_host_answer(std::string_view address, HostAnswer& out);

}  // namespace polybus::quickio::detail
