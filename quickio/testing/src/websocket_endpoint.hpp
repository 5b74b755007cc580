// SPDX-License-Identifier: Apache-2.0
// websocketpp's sans-IO server (iostream transport, config::core): connections are fed the bytes
// our own sockets read and hand back the bytes to write.
#pragma once

#include <websocketpp/config/core.hpp>
#include <websocketpp/server.hpp>

namespace polybus::quickio::testing {

using WebSocketServer = websocketpp::server<websocketpp::config::core>;

class WebSocketEndpoint {
 public:
  WebSocketEndpoint() {
    // Its default loggers write to the standard streams.
    server.clear_access_channels(websocketpp::log::alevel::all);
    server.clear_error_channels(websocketpp::log::elevel::all);
  }
  WebSocketServer server;
};

}  // namespace polybus::quickio::testing
