// SPDX-License-Identifier: Apache-2.0
// The server's end of one accepted connection in the in-process brokers (QuickIO, Figg): plain
// TCP, or TLS over TCP when the broker has a certificate, behind one set of asynchronous
// operations so that a broker's reading, writing and closing do not depend on which it is.
// Everything runs on the broker's io thread; at most one read and one write are outstanding.
#pragma once

#include "polybus/export.hpp"

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace polybus {

// A TLS server context with the certificate chain and private key of these PEM files; throws
// std::runtime_error naming the files when they cannot be loaded.
POLYBUS_API std::shared_ptr<asio::ssl::context> make_server_tls_context(
    const std::string& cert_file, const std::string& key_file);

class POLYBUS_API ServerStream {
 public:
  // tls null: plain TCP.
  ServerStream(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls);
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  bool tls() const { return tls_stream_.has_value(); }
  bool is_open() const { return socket_.is_open(); }

  // TLS: the server's handshake, failing when it has not completed within `bound` (the socket
  // is then closed). Plain TCP: completes at once.
  void async_handshake(std::chrono::milliseconds bound, std::function<void(std::error_code)> done);

  // After async_shutdown_send, what arrives is read from TCP undecrypted (to be drained), and
  // TLS's own end of stream there reads as nothing rather than as an error.
  template <typename Handler>
  void async_read_some(asio::mutable_buffer buffer, Handler&& handler) {
    if (!tls_stream_ || sent_shutdown_)
      return socket_.async_read_some(buffer, std::forward<Handler>(handler));
    tls_stream_->async_read_some(buffer, [this, handler = std::forward<Handler>(handler)](
                                             std::error_code ec, std::size_t n) mutable {
      if (sent_shutdown_ && ec == asio::error::eof) ec = {};
      handler(ec, n);
    });
  }

  template <typename ConstBuffers, typename Handler>
  void async_write(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_stream_)
      asio::async_write(*tls_stream_, buffers, std::forward<Handler>(handler));
    else
      asio::async_write(socket_, buffers, std::forward<Handler>(handler));
  }

  // Ends the sending side once everything written is out (call it with no write outstanding):
  // TLS sends its close_notify without waiting for the peer's, then TCP sends its FIN. Reading
  // goes on, so the owner can drain the peer until it closes: closing a socket with unread bytes
  // resets the connection, and the peer may lose what it had not read yet.
  void async_shutdown_send(std::function<void(std::error_code)> done);

  void close();  // both directions, now
  void reset();  // now, with a TCP RST instead of a FIN (a test broker's fault)

 private:
  asio::ip::tcp::socket socket_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls_stream_;
  asio::steady_timer handshake_timer_;
  bool sent_shutdown_ = false;
};

}  // namespace polybus
