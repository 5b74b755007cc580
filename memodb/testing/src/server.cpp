// SPDX-License-Identifier: Apache-2.0
// The MemoDB test broker's listener (TCP or IPC, the port kept while stopped) and its public
// face, Broker.
#include <unistd.h>

#include "broker.hpp"

namespace polybus::memodb::testing {

namespace {

// The TCP endpoint a generic acceptor is bound to.
asio::ip::tcp::endpoint tcp_endpoint_of(const asio::generic::stream_protocol::endpoint& bound) {
  asio::ip::tcp::endpoint tcp;
  if (bound.size() <= tcp.capacity()) {
    std::memcpy(tcp.data(), bound.data(), bound.size());
    tcp.resize(bound.size());
  }
  return tcp;
}

}  // namespace

std::string BrokerImpl::listen() {
  using Generic = asio::generic::stream_protocol;
  std::string address = url();
  std::error_code ec;
  auto acceptor = std::make_unique<asio::basic_socket_acceptor<Generic>>(io_.context());
  if (address.rfind("ipc://", 0) == 0) {
    ipc_ = true;
    ipc_path_ = address.substr(6);
    ::unlink(ipc_path_.c_str());  // a stale socket file from an earlier run
    const asio::local::stream_protocol::endpoint endpoint(ipc_path_);
    acceptor->open(Generic(endpoint.protocol()), ec);
    if (!ec) acceptor->bind(Generic::endpoint(endpoint), ec);
  } else if (address.rfind("tcp://", 0) == 0) {
    ipc_ = false;
    const std::string host_port = address.substr(6);
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos) return "no port in " + address;
    std::string host = host_port.substr(0, colon);
    if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
    const auto ip = asio::ip::make_address(host, ec);
    if (ec) return "cannot listen on " + address + ": the host must be an IP address";
    std::uint16_t port = 0;
    try {
      port = static_cast<std::uint16_t>(std::stoul(host_port.substr(colon + 1)));
    } catch (const std::exception&) {
      return "bad port in " + address;
    }
    const asio::ip::tcp::endpoint endpoint(ip, port);
    acceptor->open(Generic(endpoint.protocol()), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(Generic::endpoint(endpoint), ec);
    if (!ec && port == 0) {
      const Generic::endpoint bound = acceptor->local_endpoint(ec);
      const auto tcp = ec ? asio::ip::tcp::endpoint() : tcp_endpoint_of(bound);
      std::lock_guard<std::mutex> lock(stats_mutex_);
      url_ = "tcp://" + host_port.substr(0, colon) + ":" + std::to_string(tcp.port());
    }
  } else {
    return "cannot listen on " + address + ": tcp:// or ipc:// only";
  }
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + address + ": " + ec.message();
  port_hold_.release();
  acceptor_ = std::move(acceptor);
  running_ = true;
  // A restarted broker hands out IDs from a new range.
  next_id_ = static_cast<std::uint32_t>(random_());
  accept();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.starts;
  }
  publish_stats();
  return {};
}

void BrokerImpl::accept() {
  acceptor_->async_accept([this, acceptor = acceptor_.get()](
                              std::error_code ec, asio::generic::stream_protocol::socket socket) {
    if (!running_ || acceptor != acceptor_.get()) return;  // closed, or an earlier listener's
    if (!ec) {
      // Replies are small and go one at a time: Nagle's algorithm would hold each for the
      // client's delayed ACK.
      if (!ipc_) socket.set_option(asio::ip::tcp::no_delay(true), ec);
      auto connection = std::make_shared<Session>(
          std::move(socket), ipc_ ? sp::Carrier::ipc : sp::Carrier::tcp, ++next_connection_,
          &events_, Session::Budget{options_.max_held_requests, options_.max_held_bytes});
      connections_[connection->id()] = connection;
      connection->start();
    }
    accept();
  });
}

void BrokerImpl::connection_count(int change) {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    auto& n = stats_.connections;
    if (change > 0)
      ++n;
    else if (n > 0)
      --n;
  }
  publish_stats();
}

void BrokerImpl::close_keeping_port() {
  std::error_code ec;
  const auto bound = running_ && !ipc_ ? acceptor_->local_endpoint(ec)
                                       : asio::generic::stream_protocol::endpoint();
  const bool tcp = running_ && !ipc_ && !ec;
  close_all();
  if (tcp) port_hold_.hold(tcp_endpoint_of(bound));  // until start() listens again
}

void BrokerImpl::close_all() {
  if (!running_) return;
  running_ = false;
  std::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  acceptor_.reset();  // its pending accept completes with operation_aborted and finds nothing
  if (ipc_) ::unlink(ipc_path_.c_str());
  auto connections = std::move(connections_);
  connections_.clear();
  for (auto& [id, connection] : connections) connection->close_quietly();
  requests_.clear();
  workers_.clear();
  idle_by_service_.clear();
  queued_by_service_.clear();
  idle_count_ = 0;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.workers_by_service.clear();
  }
  jobs_.clear();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.connections = 0;
  }
  publish_stats();
}

// ---- Broker ----

std::unique_ptr<Broker> Broker::launch(BrokerOptions options) {
  return std::make_unique<Broker>(std::make_unique<BrokerImpl>(std::move(options)));
}
Broker::Broker(std::unique_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() = default;
std::string Broker::url() const {
  return impl_->url();
}
void Broker::stop() {
  impl_->run([this] {
    impl_->close_keeping_port();
    return 0;
  });
}
void Broker::start() {
  auto error = impl_->run([this] { return impl_->listen(); });
  if (!error.empty()) throw std::runtime_error("memodb test broker: " + error);
}
BrokerStats Broker::stats() const {
  return impl_->stats();
}
metrics::BrokerMetrics Broker::metrics() const {
  return impl_->run([this] { return impl_->metrics(); });
}
polybus::testing::Journal& Broker::journal() const {
  return impl_->journal();
}
polybus::testing::FaultRules& Broker::faults() const {
  return impl_->faults();
}
bool Broker::wait_until(const std::function<bool(const BrokerStats&)>& condition,
                        std::chrono::milliseconds bound) const {
  return impl_->wait_until(condition, bound);
}

}  // namespace polybus::memodb::testing
