// SPDX-License-Identifier: Apache-2.0
// The server's io thread, listener and periodic checks, its public face, and its registration
// as polybus test brokers.
#include <algorithm>

#include "connection.hpp"
#include "http_session.hpp"
#include "polybus/io/server_stream.hpp"
#include "polybus/quickio_testing.hpp"
#include "server_impl.hpp"

namespace polybus::quickio::testing {
namespace {

// Fine enough for the shortest configured interval, coarse enough to cost nothing.
std::chrono::milliseconds tick_interval(const ServerOptions& o) {
  auto shortest = std::min({o.heartbeat_interval, o.challenge_after, o.challenge_timeout,
                            o.http_poll_timeout, o.callback_expiry});
  return std::clamp(shortest / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(250));
}

}  // namespace

ServerImpl::ServerImpl(ServerOptions options)
    : options_(std::move(options)),
      tls_context_(options_.tls_cert_file.empty() || options_.tls_key_file.empty()
                       ? nullptr
                       : make_server_tls_context(options_.tls_cert_file, options_.tls_key_file)),
      acceptor_(io_.context()),
      tick_timer_(io_.context()),
      tick_interval_(tick_interval(options_)) {
  for (const auto& rule : options_.faults) faults_.add(rule);
  io_.run([this] {
    listen(options_.port);
    schedule_tick();
  });
}

ServerImpl::~ServerImpl() {
  run([this] {
    stopping_ = true;
    tick_timer_.cancel();
    close_all();
  });
  io_.stop_and_join();
}

void ServerImpl::listen(std::uint16_t port) {
  asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_hold_.release();
  port_ = acceptor_.local_endpoint().port();
  accept();
}

void ServerImpl::accept() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (ec) return;
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    ++accepted_;
    connections_[connection.get()] = connection;
    connection->start();
    accept();
  });
}

void ServerImpl::close_all() {
  std::error_code ignored;
  acceptor_.close(ignored);
  std::vector<std::string> sids;
  for (const auto& entry : sessions_) sids.push_back(entry.first);
  for (const auto& sid : sids)
    if (auto* session = find_session(sid)) end_session(*session);
  std::vector<std::shared_ptr<Connection>> connections;
  for (const auto& entry : connections_) connections.push_back(entry.second);
  for (auto& connection : connections) connection->terminate();
}

void ServerImpl::schedule_tick() {
  if (stopping_) return;
  tick_timer_.expires_after(tick_interval_);
  tick_timer_.async_wait([this](std::error_code ec) {
    if (ec || stopping_) return;
    tick();
    schedule_tick();
  });
}

void ServerImpl::tick() {
  auto now = Clock::now();
  std::vector<std::uint64_t> ids;
  ids.reserve(peers_.size());
  for (const auto& entry : peers_) ids.push_back(entry.first);
  for (auto id : ids) {
    auto it = peers_.find(id);  // an earlier check may have ended it
    if (it != peers_.end()) check_peer(*it->second, now);
  }
  // Sessions ending after a /qio/move whose client never came back for it.
  std::vector<std::string> abandoned;
  for (const auto& entry : sessions_)
    if (entry.second->ending() && now - entry.second->last_post >= 2 * options_.http_poll_timeout)
      abandoned.push_back(entry.first);
  for (const auto& sid : abandoned)
    if (auto* session = find_session(sid)) end_session(*session);
  std::vector<std::shared_ptr<Connection>> stale;
  for (const auto& entry : connections_)
    if (entry.second->lingering_too_long(now)) stale.push_back(entry.second);
  for (auto& connection : stale) connection->terminate();
}

// ---- Server ----

std::unique_ptr<Server> Server::launch(ServerOptions options) {
  return std::make_unique<Server>(std::make_unique<ServerImpl>(std::move(options)));
}
Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;
std::uint16_t Server::port() const {
  return impl_->port_;
}
std::string Server::address() const {
  return "127.0.0.1:" + std::to_string(impl_->port_);
}
void Server::stop() {
  impl_->run([this] {
    impl_->port_hold_.close_listener(impl_->acceptor_);  // until start() listens again
    impl_->close_all();
  });
}
void Server::start() {
  impl_->run([this] {
    if (!impl_->acceptor_.is_open()) impl_->listen(impl_->port_);
  });
}
std::size_t Server::connections() const {
  return impl_->run([this] {
    return impl_->count(Peer::Kind::raw) + impl_->count(Peer::Kind::websocket) +
           impl_->count(Peer::Kind::http);
  });
}
metrics::BrokerMetrics Server::metrics() const {
  return impl_->run([this] { return impl_->metrics(); });
}
std::size_t Server::raw_connections() const {
  return impl_->run([this] { return impl_->count(Peer::Kind::raw); });
}
std::size_t Server::websocket_connections() const {
  return impl_->run([this] { return impl_->count(Peer::Kind::websocket); });
}
std::size_t Server::http_sessions() const {
  return impl_->run([this] { return impl_->count(Peer::Kind::http); });
}
std::size_t Server::subscribers(const std::string& path) const {
  return impl_->run([this, &path] { return impl_->subscribers(path); });
}
void Server::move_all(const std::string& address) {
  impl_->run([this, &address] { impl_->move_all(address); });
}
void Server::set_silent(bool silent) {
  impl_->run([this, silent] { impl_->silent_ = silent; });
}
void Server::broadcast(const std::string& path, const std::string& json) {
  impl_->run([this, &path, &json] { impl_->broadcast(path, json); });
}
polybus::testing::Journal& Server::journal() const {
  return impl_->journal_;
}
polybus::testing::FaultRules& Server::faults() const {
  return impl_->faults_;
}

}  // namespace polybus::quickio::testing
