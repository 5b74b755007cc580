// SPDX-License-Identifier: Apache-2.0
// The test nsqd's server: the listener, the connections, the broker and the optional lookupd
// registration, all on one io thread. Nsqd (the public face) calls in through run().
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "broker.hpp"
#include "client_connection.hpp"
#include "http_server.hpp"
#include "lookup_registry.hpp"
#include "lookupd_channels_query.hpp"
#include "lookupd_peer.hpp"
#include "polybus/broker_admin.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/metrics.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing::detail {

// This machine's name (gethostname), as nsqd reports it.
const std::string& host_name();

class NsqdServer final : public ServerContext, public BrokerListener {
 public:
  // Binds at once; throws as Nsqd::start documents.
  explicit NsqdServer(NsqdOptions options);
  ~NsqdServer() override;

  std::uint16_t port() const { return port_; }
  std::uint16_t http_port() const { return http_port_; }
  std::uint16_t admin_port() const { return admin_port_; }
  // The address announced (NsqdOptions::broadcast_address, 127.0.0.1 when empty).
  const std::string& broadcast_address() const { return broadcast_address_; }
  std::int64_t start_time() const { return start_time_; }  // s since the Unix epoch
  // nsqd's nsqlookupd_tcp_addresses, which PUT /config/nsqlookupd_tcp_addresses replaces.
  const std::vector<std::string>& lookupd_tcp_addresses() const { return lookupd_tcp_addresses_; }
  void set_lookupd_tcp_addresses(std::vector<std::string> addresses);
  const std::unordered_map<std::uint64_t, std::shared_ptr<ClientConnection>>& connections() const {
    return connections_;
  }

  // Runs `fn` on the io thread and returns its result.
  template <typename Fn>
  auto run(Fn&& fn) {
    return io_.run(std::forward<Fn>(fn));
  }

  // On the io thread.
  void stop();
  void start();
  bool listening() const { return listening_; }
  void register_with(std::shared_ptr<LookupRegistry> registry);
  std::size_t connection_count() const { return connections_.size(); }
  metrics::BrokerMetrics metrics() const;

  bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds bound) const;

  // ServerContext
  const NsqdOptions& options() const override { return options_; }
  Broker& broker() override { return broker_; }
  asio::ssl::context* tls_context() override { return tls_ ? &*tls_ : nullptr; }
  bool tls_required() const override {
    return options_.tls_required != NsqdOptions::TlsRequired::no;
  }
  void connection_closed(std::uint64_t id) override;
  void state_changed() override;
  void count_traffic(std::size_t received, std::size_t sent) override {
    bytes_received_ += received;
    bytes_sent_ += sent;
  }
  polybus::testing::Journal& journal() override { return journal_; }
  polybus::testing::FaultRules& faults() override { return faults_; }

  // BrokerListener
  void topic_created(const std::string& topic) override;
  void topic_deleted(const std::string& topic) override;
  void channel_created(const std::string& topic, const std::string& channel) override;
  void channel_deleted(const std::string& topic, const std::string& channel) override;

 private:
  void listen();
  void accept();
  void announce_everything();
  // nsqlookupd over TCP: a peer per address, a PING to each every lookupd_ping_interval.
  void connect_lookupd_peers();
  void close_lookupd_peers();
  void tell_lookupd_peers(const std::string& line);
  // nsqd's GetTopic: a new topic holds what is published until the channels its nsqlookupd
  // know exist here.
  void ask_lookupd_for_channels(const std::string& topic);
  void arm_lookupd_ping();
  std::string lookupd_identify_body() const;
  std::uint16_t announced_tcp_port() const {
    return options_.broadcast_tcp_port != 0 ? options_.broadcast_tcp_port : port_;
  }
  std::uint16_t announced_http_port() const {
    return options_.broadcast_http_port != 0 ? options_.broadcast_http_port : http_port_;
  }
  std::vector<std::string> lookupd_registrations() const;
  ProducerInfo producer() const;
  void shutdown();

  IoThread io_;  // first: destroyed last, after everything that uses its io_context
  const NsqdOptions options_;
  polybus::testing::Journal journal_{options_.journal_capacity};
  polybus::testing::FaultRules faults_;
  asio::ssl::context plain_ssl_;           // streams need a context even when TLS is off
  std::optional<asio::ssl::context> tls_;  // with the configured certificate
  Broker broker_;
  std::optional<asio::ip::tcp::acceptor> acceptor_;
  PortHold port_hold_{io_.context()};  // the port, while stopped
  std::uint16_t port_ = 0;
  std::optional<HttpServer> http_;
  std::unique_ptr<polybus::testing::BrokerAdmin> admin_;
  std::uint16_t admin_port_ = 0;
  std::uint16_t http_port_ = 0;
  std::string broadcast_address_;
  std::vector<std::string> lookupd_tcp_addresses_;
  std::int64_t start_time_ = 0;
  bool listening_ = false;
  std::uint64_t listen_generation_ = 0;
  std::uint64_t next_connection_id_ = 0;  // also the number of connections accepted
  std::uint64_t bytes_received_ = 0;
  std::uint64_t bytes_sent_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<ClientConnection>> connections_;
  std::shared_ptr<LookupRegistry> registry_;
  std::vector<std::shared_ptr<LookupdPeer>> lookupd_peers_;
  static constexpr std::size_t kMaxChannelQueries = 64;
  std::vector<std::weak_ptr<LookupdChannelsQuery>> channel_queries_;
  asio::steady_timer lookupd_ping_timer_{io_.context()};

  mutable std::mutex change_mutex_;
  mutable std::condition_variable change_cv_;
  std::uint64_t change_count_ = 0;
};

}  // namespace polybus::nsq::testing::detail
