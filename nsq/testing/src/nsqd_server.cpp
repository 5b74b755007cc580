// SPDX-License-Identifier: Apache-2.0
#include "nsqd_server.hpp"

#include <unistd.h>

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>

#include "go_text.hpp"
#include "lookupd_channels_query.hpp"
#include "nsqd_http.hpp"

namespace polybus::nsq::testing::detail {

const std::string& host_name() {
  static const std::string name = [] {
    std::array<char, 256> buffer{};
    if (gethostname(buffer.data(), buffer.size() - 1) != 0) return std::string("localhost");
    return std::string(buffer.data());
  }();
  return name;
}

namespace {

asio::ssl::context make_tls_context(const NsqdOptions& options) {
  asio::ssl::context context(asio::ssl::context::tls_server);
  try {
    context.use_certificate_chain_file(options.tls_cert_file);
    context.use_private_key_file(options.tls_key_file, asio::ssl::context::pem);
  } catch (const std::system_error& error) {
    throw std::runtime_error("nsqd test server: cannot load TLS certificate " +
                             options.tls_cert_file + " / key " + options.tls_key_file + ": " +
                             error.what());
  }
  SSL_CTX_set_min_proto_version(context.native_handle(), options.tls_min_version);
  using Auth = NsqdOptions::TlsClientAuth;
  if (options.tls_client_auth == Auth::none) return context;
  if (!options.tls_root_ca_file.empty()) {
    try {
      context.load_verify_file(options.tls_root_ca_file);
    } catch (const std::system_error& error) {
      throw std::runtime_error("nsqd test server: cannot load TLS root CA file " +
                               options.tls_root_ca_file + ": " + error.what());
    }
  }
  context.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  // Go's RequireAnyClientCert: a certificate must come, whoever signed it.
  if (options.tls_client_auth == Auth::require) {
    context.set_verify_callback([](bool, asio::ssl::verify_context&) { return true; });
  }
  return context;
}

// nsqd: a client certificate policy makes TLS required.
constexpr std::size_t kJournalFileCapacity = 100000;

NsqdOptions normalized(NsqdOptions options) {
  if (options.tls_client_auth != NsqdOptions::TlsClientAuth::none &&
      options.tls_required == NsqdOptions::TlsRequired::no) {
    options.tls_required = NsqdOptions::TlsRequired::yes;
  }
  // A journal written to a file or served by the admin API records, whatever it keeps.
  if ((!options.journal_file.empty() || options.admin_port) && options.journal_capacity == 0)
    options.journal_capacity = kJournalFileCapacity;
  return options;
}

}  // namespace

NsqdServer::NsqdServer(NsqdOptions options)
    : options_(normalized(std::move(options))),
      plain_ssl_(asio::ssl::context::tls_server),
      broker_(io_.context(), options_, *this),
      port_(options_.tcp_port),
      http_port_(options_.http_port.value_or(0)),
      broadcast_address_(options_.broadcast_address.empty() ? "127.0.0.1"
                                                            : options_.broadcast_address),
      lookupd_tcp_addresses_(options_.lookupd_tcp_addresses),
      start_time_(std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()) {
  if (!options_.tls_cert_file.empty() && !options_.tls_key_file.empty()) {
    tls_.emplace(make_tls_context(options_));
  }
  if (!options_.lookupd_tcp_addresses.empty() && !options_.http_port) {
    throw std::invalid_argument(
        "nsqd test server: lookupd_tcp_addresses need http_port: nsqlookupd refuses an nsqd "
        "that announces no HTTP port");
  }
  if (!options_.journal_file.empty()) journal_.write_to(options_.journal_file);
  for (const polybus::testing::FaultRule& rule : options_.faults) faults_.add(rule);
  if (options_.admin_port) {
    admin_ = std::make_unique<polybus::testing::BrokerAdmin>(
        options_.admin_host, *options_.admin_port, journal_, faults_, options_.clock);
    admin_port_ = admin_->port();  // written once, read by any thread
  }
  io_.run([this] { listen(); });
}

NsqdServer::~NsqdServer() {
  // First, off the io thread: an advance of the clock it serves waits for that thread.
  admin_.reset();
  io_.run([this] { shutdown(); });
  io_.join();
}

void NsqdServer::shutdown() {
  stop();
  port_hold_.release();
  broker_.close();
  registry_.reset();
}

void NsqdServer::listen() {
  asio::ip::tcp::acceptor acceptor(io_.context());
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options_.tcp_host), port_);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(endpoint);  // throws std::system_error, e.g. when the port was taken
  acceptor.listen();
  port_hold_.release();
  if (port_ == 0) port_ = acceptor.local_endpoint().port();  // written once, read by any thread
  acceptor_.emplace(std::move(acceptor));
  if (options_.http_port) {
    const asio::ip::tcp::endpoint http_endpoint(asio::ip::make_address(options_.http_host),
                                                http_port_);
    http_.emplace(io_.context(), http_endpoint, http_body_limit(options_),
                  http_handlers(*this));  // throws std::system_error, the TCP listener closes
    if (http_port_ == 0) http_port_ = http_->port();  // written once, read by any thread
  }
  listening_ = true;
  ++listen_generation_;
  accept();
  announce_everything();
  connect_lookupd_peers();
}

void NsqdServer::accept() {
  const std::uint64_t generation = listen_generation_;
  acceptor_->async_accept([this, generation](std::error_code ec, asio::ip::tcp::socket socket) {
    if (generation != listen_generation_ || !listening_) return;  // a listener since closed
    if (!ec) {
      std::error_code ignored;
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      const std::uint64_t id = ++next_connection_id_;
      auto connection = std::make_shared<ClientConnection>(*this, std::move(socket), id,
                                                           tls_ ? *tls_ : plain_ssl_);
      connections_.emplace(id, connection);
      connection->start();
      state_changed();
    }
    accept();
  });
}

void NsqdServer::stop() {
  if (!listening_) return;
  ++listen_generation_;                   // the pending accept is dropped
  port_hold_.close_listener(*acceptor_);  // until start() listens again
  acceptor_.reset();
  http_.reset();
  // Closing removes each from connections_, so walk a copy. Ephemeral channels go with their
  // subscribers, and nsqlookupd hears of it while this nsqd is still registered.
  const auto connections = connections_;
  for (const auto& [id, connection] : connections) connection->close();
  connections_.clear();
  listening_ = false;
  close_lookupd_peers();  // nsqlookupd takes this nsqd out as its connections close
  const auto queries = std::move(channel_queries_);
  channel_queries_.clear();
  for (const auto& query : queries) {
    if (auto alive = query.lock()) alive->cancel();
  }
  broker_.return_in_flight();
  // Its connection to nsqlookupd closes with it: every registration loses this producer.
  if (registry_) registry_->remove_producer(producer().id());
  state_changed();
}

void NsqdServer::start() {
  if (listening_) return;
  listen();
  state_changed();
}

void NsqdServer::connection_closed(std::uint64_t id) {
  connections_.erase(id);
}

metrics::BrokerMetrics NsqdServer::metrics() const {
  metrics::BrokerMetrics m;
  m.scheme = "nsq";
  m.running = listening_;
  m.connections = connections_.size();
  m.connections_accepted = next_connection_id_;
  m.bytes_received = bytes_received_;
  m.bytes_sent = bytes_sent_;
  for (const auto& [name, topic] : broker_.topics()) {  // sorted by name, channels too
    m.topics.push_back({name, topic->message_count, topic->depth()});
    for (const auto& [channel_name, channel] : topic->channels()) {
      metrics::BrokerQueueMetrics q;
      q.topic = name;
      q.group = channel_name;
      q.delivered = channel->delivered_count();
      q.redelivered = channel->redelivered_count();
      q.acked = channel->finish_count();
      q.queued = channel->depth() + channel->deferred();
      q.in_flight = channel->in_flight();
      q.consumers = channel->subscriber_count();
      m.queues.push_back(std::move(q));
    }
  }
  return m;
}

void NsqdServer::state_changed() {
  {
    std::lock_guard<std::mutex> lock(change_mutex_);
    ++change_count_;
  }
  change_cv_.notify_all();
}

bool NsqdServer::wait_until(const std::function<bool()>& condition,
                            std::chrono::milliseconds bound) const {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (true) {
    std::uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(change_mutex_);
      seen = change_count_;
    }
    if (condition()) return true;
    std::unique_lock<std::mutex> lock(change_mutex_);
    if (!change_cv_.wait_until(lock, deadline, [&] { return change_count_ != seen; })) {
      lock.unlock();
      return condition();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// nsqlookupd registration

ProducerInfo NsqdServer::producer() const {
  ProducerInfo info;
  info.remote_address = "127.0.0.1:" + std::to_string(port_);
  info.hostname = host_name();
  info.broadcast_address = broadcast_address_;
  info.tcp_port = announced_tcp_port();
  info.http_port = announced_http_port();
  return info;
}

void NsqdServer::register_with(std::shared_ptr<LookupRegistry> registry) {
  registry_ = std::move(registry);
  if (listening_) announce_everything();
}

void NsqdServer::announce_everything() {
  if (!registry_) return;
  const ProducerInfo self = producer();
  registry_->add_node(self);
  for (const auto& [topic_name, topic] : broker_.topics()) {
    registry_->add_topic_producer(topic_name, self);
    for (const auto& [channel_name, channel] : topic->channels()) {
      registry_->add_channel_producer(topic_name, channel_name, self);
    }
  }
}

void NsqdServer::topic_created(const std::string& topic) {
  if (registry_ && listening_) registry_->add_topic_producer(topic, producer());
  ask_lookupd_for_channels(topic);
  tell_lookupd_peers("REGISTER " + topic + "\n");
}

void NsqdServer::ask_lookupd_for_channels(const std::string& topic) {
  std::vector<std::string> addresses;
  for (const auto& peer : lookupd_peers_) {
    if (!peer->http_address().empty()) addresses.push_back(peer->http_address());
  }
  Topic* created = broker_.find_topic(topic);
  if (addresses.empty() || created == nullptr || !listening_) return;
  // Forget the queries that have answered. Past kMaxChannelQueries at once (a client creating
  // topics by the thousand), a new topic starts without asking, rather than opening a
  // connection per topic without bound.
  channel_queries_.erase(
      std::remove_if(channel_queries_.begin(), channel_queries_.end(),
                     [](const std::weak_ptr<LookupdChannelsQuery>& q) { return q.expired(); }),
      channel_queries_.end());
  if (channel_queries_.size() + addresses.size() > kMaxChannelQueries) return;
  created->starting = true;
  // Every answer (or failure) counted; the union of the channels once all are in.
  struct Pending {
    std::size_t left;
    std::vector<std::string> channels;
  };
  auto pending = std::make_shared<Pending>(Pending{addresses.size(), {}});
  for (const std::string& address : addresses) {
    channel_queries_.push_back(query_lookupd_channels(
        io_.context(), address, topic, [this, topic, pending](std::vector<std::string> channels) {
          pending->channels.insert(pending->channels.end(), channels.begin(), channels.end());
          if (--pending->left > 0) return;
          broker_.start_topic(topic, pending->channels);
          state_changed();
        }));
  }
}

void NsqdServer::topic_deleted(const std::string& topic) {
  if (registry_ && listening_) registry_->remove_topic_producer(topic, producer().id());
  tell_lookupd_peers("UNREGISTER " + topic + "\n");
}

void NsqdServer::channel_created(const std::string& topic, const std::string& channel) {
  if (registry_ && listening_) registry_->add_channel_producer(topic, channel, producer());
  tell_lookupd_peers("REGISTER " + topic + " " + channel + "\n");
}

void NsqdServer::channel_deleted(const std::string& topic, const std::string& channel) {
  if (registry_ && listening_) {
    registry_->remove_channel_producer(topic, channel, producer().id());
  }
  tell_lookupd_peers("UNREGISTER " + topic + " " + channel + "\n");
}

// ---------------------------------------------------------------------------------------------
// nsqlookupd over TCP

std::string NsqdServer::lookupd_identify_body() const {
  // go-nsq's Identify marshals a map: its keys in order.
  return "{\"broadcast_address\":" + go_json_string(broadcast_address_) +
         ",\"hostname\":" + go_json_string(host_name()) +
         ",\"http_port\":" + std::to_string(announced_http_port()) +
         ",\"tcp_port\":" + std::to_string(announced_tcp_port()) + ",\"version\":\"1.3.0\"}";
}

std::vector<std::string> NsqdServer::lookupd_registrations() const {
  // As nsqd's connect callback: a topic alone when it has no channel, else each channel.
  std::vector<std::string> lines;
  for (const auto& [topic_name, topic] : broker_.topics()) {
    if (topic->channels().empty()) lines.push_back("REGISTER " + topic_name + "\n");
    for (const auto& [channel_name, channel] : topic->channels()) {
      lines.push_back("REGISTER " + topic_name + " " + channel_name + "\n");
    }
  }
  return lines;
}

void NsqdServer::connect_lookupd_peers() {
  for (const std::string& address : lookupd_tcp_addresses_) {
    const bool known = std::any_of(lookupd_peers_.begin(), lookupd_peers_.end(),
                                   [&](const auto& peer) { return peer->address() == address; });
    if (known) continue;
    auto peer = std::make_shared<LookupdPeer>(
        io_.context(), address,
        LookupdPeer::Callbacks{[this] { return lookupd_identify_body(); },
                               [this] { return lookupd_registrations(); }, options_.log});
    peer->start();
    lookupd_peers_.push_back(std::move(peer));
  }
  if (!lookupd_peers_.empty()) arm_lookupd_ping();
}

void NsqdServer::close_lookupd_peers() {
  for (const auto& peer : lookupd_peers_) peer->close();
  lookupd_peers_.clear();
  lookupd_ping_timer_.cancel();
}

void NsqdServer::tell_lookupd_peers(const std::string& line) {
  if (!listening_) return;
  for (const auto& peer : lookupd_peers_) peer->command(line);
}

void NsqdServer::arm_lookupd_ping() {
  lookupd_ping_timer_.expires_after(options_.lookupd_ping_interval);
  lookupd_ping_timer_.async_wait([this](std::error_code ec) {
    if (ec || !listening_) return;
    for (const auto& peer : lookupd_peers_) {
      peer->start();  // a peer whose connection failed tries again, once per interval
      peer->command("PING\n");
    }
    arm_lookupd_ping();
  });
}

void NsqdServer::set_lookupd_tcp_addresses(std::vector<std::string> addresses) {
  lookupd_tcp_addresses_ = std::move(addresses);
  // nsqd closes the peers no longer listed and connects to the new ones.
  auto& peers = lookupd_peers_;
  for (auto it = peers.begin(); it != peers.end();) {
    const bool listed = std::find(lookupd_tcp_addresses_.begin(), lookupd_tcp_addresses_.end(),
                                  (*it)->address()) != lookupd_tcp_addresses_.end();
    if (listed) {
      ++it;
      continue;
    }
    (*it)->close();
    it = peers.erase(it);
  }
  if (listening_) connect_lookupd_peers();
}

}  // namespace polybus::nsq::testing::detail
