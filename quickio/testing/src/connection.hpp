// SPDX-License-Identifier: Apache-2.0
// One accepted TCP connection. Its first bytes decide what it carries, as on the real server:
// "/qio/ohai" raw QuickIO, an HTTP request otherwise (a GET with Upgrade becomes WebSocket, POSTs
// are long polling). Writes are gathered: what is queued while a write is in flight goes out
// in the next one. With a certificate configured, all of it runs over TLS: the handshake comes
// first, and a client that fails it is closed.
#pragma once

#include <asio.hpp>
#include <deque>
#include <memory>
#include <string>

#include "polybus/io/server_stream.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/http.hpp"
#include "server_impl.hpp"

namespace polybus::quickio::testing {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerImpl& server, asio::ip::tcp::socket socket);
  ~Connection();

  void start();  // the TLS handshake, if any, then reading
  // Sends what is queued, shuts down the sending side and drains the peer's bytes until it
  // closes (or kLingerBound passes): the client reads everything written before the close.
  void close_gracefully();
  void terminate();  // closes the connection now
  void reset();      // closes the connection now with a TCP RST (a fault)
  // Writes nothing until `delay` has passed (a fault); what is sent meanwhile waits in order.
  void hold_output(std::chrono::milliseconds delay);
  bool lingering_too_long(Clock::time_point now) const;

  // Raw and WebSocket: one event to the client.
  void send_event(std::string_view text);
  // HTTP: fills in the response slot `id` (see http_session.hpp) and writes responses in order.
  bool complete_response(std::uint64_t id, std::string_view body);  // false: connection gone

 private:
  enum class Mode { sniffing, raw, websocket, http, closing };
  class StreamPeer;

  void read();
  void received(std::string_view bytes);
  void sniff(std::string_view bytes);
  void raw_received(std::string_view bytes);
  void http_received(std::string_view bytes);
  void start_websocket(std::string_view rest);
  void websocket_received(std::string_view bytes);
  void websocket_text(const std::string& text);
  void websocket_close(std::uint16_t code, const std::string& reason);
  void handle_get(std::string_view rest);
  void end_peer();
  bool http_request_head();
  void http_request();
  void respond(int status, std::string_view body, bool close);
  std::uint64_t add_response_slot();
  void flush_responses();
  void write_bytes(const char* data, std::size_t size);
  void write();

  ServerImpl& server_;
  ServerStream stream_;
  Mode mode_ = Mode::sniffing;
  bool terminated_ = false;
  bool close_when_flushed_ = false;
  Clock::time_point closing_since_;
  char buffer_[64 * 1024];
  std::string sniffed_;
  std::string out_;      // gathered for the next write
  std::string writing_;  // in flight
  bool write_in_flight_ = false;
  asio::steady_timer hold_timer_;
  bool output_held_ = false;
  bool overflowed_ = false;
  std::unique_ptr<StreamPeer> peer_;  // raw and WebSocket, after the handshake
  bool peer_registered_ = false;
  RawFrameDecoder raw_decoder_;
  WebSocketServer::connection_ptr websocket_;
  bool websocket_handshaken_ = false;
  bool websocket_dropping_ = false;
  http::RequestReader http_parser_;
  bool http_refused_ = false;  // an error answered: the connection closes
  struct Response {
    std::uint64_t id;
    bool ready = false;
    std::string bytes;
  };
  std::deque<Response> responses_;
  std::uint64_t next_response_id_ = 1;
};

}  // namespace polybus::quickio::testing
