// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/server_stream.hpp"

#include <asio/post.hpp>
#include <stdexcept>

namespace polybus {

std::shared_ptr<asio::ssl::context> make_server_tls_context(const std::string& cert_file,
                                                            const std::string& key_file) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  std::error_code ec;
  context->use_certificate_chain_file(cert_file, ec);
  if (!ec) context->use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) {
    throw std::runtime_error("test server: cannot load TLS certificate " + cert_file + " / key " +
                             key_file + ": " + ec.message());
  }
  return context;
}

ServerStream::ServerStream(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls)
    : socket_(std::move(socket)),
      tls_context_(std::move(tls)),
      handshake_timer_(socket_.get_executor()) {
  // A broker answers small frames one at a time (a publish's OK, a heartbeat): with Nagle's
  // algorithm each waits for the client's delayed ACK, tens of milliseconds on loopback.
  std::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  if (tls_context_) tls_stream_.emplace(socket_, *tls_context_);
}

void ServerStream::async_handshake(std::chrono::milliseconds bound,
                                   std::function<void(std::error_code)> done) {
  if (!tls_stream_) return asio::post(socket_.get_executor(), [done] { done({}); });
  handshake_timer_.expires_after(bound);
  // The copy of done keeps its owner, and so this stream, alive until the wait has ended: it may
  // have expired just as the handshake completed.
  handshake_timer_.async_wait([this, keep_owner = done](std::error_code ec) {
    if (!ec) close();  // the handshake then fails with operation_aborted
  });
  tls_stream_->async_handshake(asio::ssl::stream_base::server,
                               [this, done = std::move(done)](std::error_code ec) {
                                 handshake_timer_.cancel();
                                 done(ec);
                               });
}

void ServerStream::async_shutdown_send(std::function<void(std::error_code)> done) {
  if (sent_shutdown_) return asio::post(socket_.get_executor(), [done] { done({}); });
  sent_shutdown_ = true;
  auto shutdown_tcp = [this, done = std::move(done)](std::error_code ec) {
    std::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    done(ec);
  };
  if (!tls_stream_) {
    return asio::post(socket_.get_executor(), [shutdown_tcp] { shutdown_tcp({}); });
  }
  // As though the peer's close_notify had come: SSL_shutdown then only sends ours and completes,
  // rather than reading for the peer's while our reads are outstanding.
  SSL_set_shutdown(tls_stream_->native_handle(), SSL_RECEIVED_SHUTDOWN);
  tls_stream_->async_shutdown(std::move(shutdown_tcp));
}

void ServerStream::close() {
  std::error_code ignored;
  handshake_timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void ServerStream::reset() {
  std::error_code ignored;
  socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  handshake_timer_.cancel();
  socket_.close(ignored);
}

}  // namespace polybus
