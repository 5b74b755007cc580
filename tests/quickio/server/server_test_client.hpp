// SPDX-License-Identifier: Apache-2.0
// Blocking clients that speak QuickIO to the in-process server byte by byte: raw TCP, WebSocket
// (frames built by hand, so tests can also send what a correct client never would) and HTTP.
// Every read is bounded by kWaitBound (SO_RCVTIMEO): a missing answer fails, never hangs.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <asio.hpp>
#include <map>
#include <optional>
#include <string>

#include "polybus/quickio/codec.hpp"
#include "test_support.hpp"
#include "ws_frames.hpp"

namespace polybus::quickio::test {

using asio::ip::tcp;

class Socket {
 public:
  explicit Socket(std::uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    timeval bound{static_cast<time_t>(polybus::test::kWaitBound.count()), 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    socket_.set_option(tcp::no_delay(true));
  }
  void write(std::string_view bytes) {
    asio::write(socket_, asio::buffer(bytes.data(), bytes.size()));
  }
  // Exactly n bytes; nullopt at end of stream or on error (including the time bound).
  std::optional<std::string> read(std::size_t n) {
    std::string out(n, '\0');
    std::error_code ec;
    asio::read(socket_, asio::buffer(out), ec);
    if (ec) return std::nullopt;
    return out;
  }
  // True when the server closed the connection (reads end without the time bound passing).
  bool closed_by_server() {
    char byte;
    std::error_code ec;
    for (;;) {
      socket_.read_some(asio::buffer(&byte, 1), ec);
      if (ec) return ec == asio::error::eof || ec == asio::error::connection_reset;
    }
  }
  tcp::socket& socket() { return socket_; }

 private:
  asio::io_context io_;
  tcp::socket socket_;
};

class RawClient {
 public:
  explicit RawClient(std::uint16_t port, bool handshake = true) : socket_(port) {
    if (handshake) {
      socket_.write(kHandshake);
      ok_ = socket_.read(kHandshake.size()) == std::optional<std::string>(kHandshake);
    }
  }
  bool handshaken() const { return ok_; }
  void send(std::string_view event) {
    std::string frame;
    append_raw_frame(frame, event);
    socket_.write(frame);
  }
  std::optional<std::string> next() {
    auto header = socket_.read(kRawLengthSize);
    if (!header) return std::nullopt;
    std::uint64_t size = 0;
    for (unsigned char byte : *header) size = (size << 8) | byte;
    if (size > (1u << 24)) return std::nullopt;
    return socket_.read(static_cast<std::size_t>(size));
  }
  // The next event that is not a heartbeat without callback.
  std::optional<std::string> next_non_heartbeat() {
    for (;;) {
      auto event = next();
      if (!event || *event != "/qio/heartbeat:0=null") return event;
    }
  }
  Socket& socket() { return socket_; }

 private:
  Socket socket_;
  bool ok_ = false;
};

struct WsFrame {
  int opcode = 0;
  std::string payload;
  int close_code() const {
    return payload.size() >= 2 ? (static_cast<unsigned char>(payload[0]) << 8) |
                                     static_cast<unsigned char>(payload[1])
                               : 0;
  }
};

// A client's frame: masked unless told otherwise (a server must refuse that).
inline std::string ws_frame(int opcode, std::string_view payload, bool masked = true) {
  static constexpr unsigned char kKey[4] = {0x12, 0x34, 0x56, 0x78};
  return ::polybus::test::ws_frame(static_cast<unsigned char>(0x80 | opcode), payload, 0,
                                   masked ? kKey : nullptr);
}

inline std::string ws_upgrade_request(std::string_view extra_headers) {
  return "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
         std::string(extra_headers) + "\r\n";
}

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Reads one HTTP response (head, then Content-Length bytes of body).
inline std::optional<HttpResponse> read_http_response(Socket& socket) {
  std::string head;
  while (head.size() < 4 || head.compare(head.size() - 4, 4, "\r\n\r\n") != 0) {
    auto byte = socket.read(1);
    if (!byte || head.size() > 16384) return std::nullopt;
    head += *byte;
  }
  HttpResponse response;
  response.status = std::stoi(head.substr(9, 3));
  std::size_t pos = head.find("\r\n") + 2;
  while (pos < head.size() - 2) {
    std::size_t end = head.find("\r\n", pos);
    std::string line = head.substr(pos, end - pos);
    std::size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    response.headers[name] = line.substr(colon + 2);
    pos = end + 2;
  }
  if (response.headers.count("content-length")) {
    auto body = socket.read(std::stoul(response.headers["content-length"]));
    if (!body) return std::nullopt;
    response.body = *body;
  }
  return response;
}

class WsClient {
 public:
  // Upgrades with the given headers; handshake() then does the QuickIO one.
  WsClient(std::uint16_t port, std::string_view headers =
                                   "Sec-WebSocket-Protocol: quickio\r\n"
                                   "Sec-WebSocket-Version: 13\r\n")
      : socket_(port) {
    socket_.write(ws_upgrade_request(headers));
    upgrade_ = read_http_response(socket_);
  }
  const std::optional<HttpResponse>& upgrade() const { return upgrade_; }
  bool handshake() {
    send(kHandshake);
    auto frame = next();
    return frame && frame->payload == kHandshake;
  }
  void send(std::string_view text) { socket_.write(ws_frame(1, text)); }
  std::optional<WsFrame> next() {
    auto header = socket_.read(2);
    if (!header) return std::nullopt;
    WsFrame frame;
    frame.opcode = static_cast<unsigned char>((*header)[0]) & 0x0f;
    std::uint64_t size = static_cast<unsigned char>((*header)[1]) & 0x7f;
    if (size >= 126) {
      auto ext = socket_.read(size == 126 ? 2 : 8);
      if (!ext) return std::nullopt;
      size = 0;
      for (unsigned char byte : *ext) size = (size << 8) | byte;
    }
    auto payload = socket_.read(static_cast<std::size_t>(size));
    if (!payload) return std::nullopt;
    frame.payload = *payload;
    return frame;
  }
  // The next text payload that is not a heartbeat without callback.
  std::optional<std::string> next_text() {
    for (;;) {
      auto frame = next();
      if (!frame || frame->opcode != 1) return std::nullopt;
      if (frame->payload != "/qio/heartbeat:0=null") return frame->payload;
    }
  }
  Socket& socket() { return socket_; }

 private:
  Socket socket_;
  std::optional<HttpResponse> upgrade_;
};

inline std::string http_post(std::string_view target, std::string_view body) {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

}  // namespace polybus::quickio::test
