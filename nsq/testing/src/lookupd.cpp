// SPDX-License-Identifier: Apache-2.0
// The test nsqlookupd: its HTTP API and (when asked) its TCP protocol, served from a
// LookupRegistry on an io thread of its own, with the status codes, headers and bodies
// nsqlookupd 1.3 sends.
#include <asio/ip/tcp.hpp>
#include <memory>
#include <optional>

#include "go_query.hpp"
#include "http_server.hpp"
#include "lookup_registry.hpp"
#include "lookupd_tcp.hpp"
#include "nsqd_server.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing {
namespace detail {

class LookupdServer {
 public:
  LookupdServer(std::shared_ptr<LookupRegistry> registry, const LookupdOptions& options)
      : registry_(std::move(registry)), journal_(options.journal_capacity) {
    registry_->set_timing(options.inactive_producer_timeout, options.tombstone_lifetime);
    registry_->set_clock(options.clock);
    for (const auto& rule : options.faults) faults_.add(rule);
    io_.run([this, &options] {
      const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options.http_host),
                                             options.http_port);
      // nsqlookupd's endpoints take no body worth keeping; 1 MiB bounds what it reads anyway.
      http_.emplace(
          io_.context(), endpoint, 1024 * 1024,
          HttpServer::Handlers{
              {}, [this](const http::Request& r) { return respond(r); }, {}, &journal_, &faults_});
      http_port_ = http_->port();
      if (options.tcp_port) {
        const asio::ip::tcp::endpoint tcp(asio::ip::make_address(options.tcp_host),
                                          *options.tcp_port);
        tcp_.emplace(io_.context(), tcp, registry_,
                     options.broadcast_address.empty() ? host_name() : options.broadcast_address);
        tcp_->set_http_port(http_port_);
        tcp_port_ = tcp_->port();
      }
    });
  }

  ~LookupdServer() {
    io_.run([this] {
      http_.reset();
      tcp_.reset();
    });
    io_.join();
  }

  std::uint16_t http_port() const { return http_port_; }
  std::uint16_t tcp_port() const { return tcp_port_; }
  polybus::testing::Journal& journal() { return journal_; }
  polybus::testing::FaultRules& faults() { return faults_; }

  HttpResponse respond(const http::Request& request) {
    const std::string& path = request.path;
    const bool get = path == "/ping" || path == "/info" || path == "/lookup" || path == "/topics" ||
                     path == "/channels" || path == "/nodes";
    const bool post = path == "/topic/create" || path == "/topic/delete" ||
                      path == "/topic/tombstone" || path == "/channel/create" ||
                      path == "/channel/delete";
    if (!get && !post) return v1_error(404, "NOT_FOUND");
    const char* method = get ? "GET" : "POST";
    if (request.method != method) {
      const std::string allow = get ? "GET, OPTIONS" : "OPTIONS, POST";
      if (request.method == "OPTIONS") return HttpResponse{200, {}, false, {}, allow};
      return v1_method_not_allowed(allow);
    }
    if (path == "/ping") return HttpResponse{200, "text/plain; charset=utf-8", false, "OK", {}};
    if (path == "/info") return v1_json(R"({"version":"1.3.0"})");
    if (path == "/nodes") return json(registry_->nodes());
    if (path == "/topics") return json(registry_->topics());
    bool valid = true;
    query_value(request.query, "", valid);
    if (!valid) return v1_error(400, "INVALID_REQUEST");
    const auto get_value = [&](const char* key) {
      bool ignored = true;
      return query_value(request.query, key, ignored);
    };
    const std::optional<std::string> topic = get_value("topic");
    if (!topic) return v1_error(400, "MISSING_ARG_TOPIC");
    if (path == "/lookup") return json(registry_->lookup(*topic));
    if (path == "/channels") return json(registry_->channels(*topic));
    if (path == "/topic/create") {
      if (!valid_topic_name(*topic)) return v1_error(400, "INVALID_ARG_TOPIC");
      registry_->create_topic(*topic);
      return v1_empty();
    }
    if (path == "/topic/delete") {
      registry_->remove_topic(*topic);
      return v1_empty();
    }
    if (path == "/topic/tombstone") {
      const std::optional<std::string> node = get_value("node");
      if (!node) return v1_error(400, "MISSING_ARG_NODE");
      registry_->tombstone(*topic, *node);
      return v1_empty();
    }
    // The channel endpoints check their arguments as nsqd's do (GetTopicChannelArgs).
    if (!valid_topic_name(*topic)) return v1_error(400, "INVALID_ARG_TOPIC");
    const std::optional<std::string> channel = get_value("channel");
    if (!channel) return v1_error(400, "MISSING_ARG_CHANNEL");
    if (!valid_channel_name(*channel)) return v1_error(400, "INVALID_ARG_CHANNEL");
    if (path == "/channel/create") {
      registry_->create_channel(*topic, *channel);
      return v1_empty();
    }
    return registry_->delete_channel(*topic, *channel) ? v1_empty()
                                                       : v1_error(404, "CHANNEL_NOT_FOUND");
  }

 private:
  static HttpResponse json(const LookupResult& result) {
    return HttpResponse{result.status, "application/json; charset=utf-8", true, result.json, {}};
  }

  IoThread io_;  // first: destroyed last
  std::shared_ptr<LookupRegistry> registry_;
  polybus::testing::Journal journal_;  // before http_, which records into it
  polybus::testing::FaultRules faults_;
  std::optional<HttpServer> http_;
  std::optional<LookupdTcpServer> tcp_;
  std::uint16_t http_port_ = 0;
  std::uint16_t tcp_port_ = 0;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Lookupd

std::unique_ptr<Lookupd> Lookupd::start(std::uint16_t http_port) {
  LookupdOptions options;
  options.http_port = http_port;
  return start(std::move(options));
}

std::unique_ptr<Lookupd> Lookupd::start(LookupdOptions options) {
  return std::unique_ptr<Lookupd>(new Lookupd(std::move(options)));
}

Lookupd::Lookupd(LookupdOptions options)
    : registry_(std::make_shared<detail::LookupRegistry>()),
      server_(std::make_unique<detail::LookupdServer>(registry_, options)) {}

Lookupd::~Lookupd() = default;

std::uint16_t Lookupd::http_port() const {
  return server_->http_port();
}

std::uint16_t Lookupd::tcp_port() const {
  return server_->tcp_port();
}

std::string Lookupd::tcp_address() const {
  return tcp_port() == 0 ? std::string() : "127.0.0.1:" + std::to_string(tcp_port());
}

std::string Lookupd::http_address() const {
  return "127.0.0.1:" + std::to_string(http_port());
}

void Lookupd::add_producer(const std::string& topic, const std::string& broadcast_address,
                           std::uint16_t tcp_port, std::uint16_t http_port) {
  detail::ProducerInfo producer;
  producer.remote_address = broadcast_address + ":" + std::to_string(tcp_port);
  producer.hostname = broadcast_address;
  producer.broadcast_address = broadcast_address;
  producer.tcp_port = tcp_port;
  producer.http_port = http_port;
  registry_->add_topic_producer(topic, producer);
  // nsqlookupd lists in /nodes every nsqd that registered a topic: so does a hand-made one.
  registry_->add_node(producer);
}

void Lookupd::remove_producer(const std::string& topic, const std::string& broadcast_address,
                              std::uint16_t tcp_port) {
  const std::string id = broadcast_address + ":" + std::to_string(tcp_port);
  registry_->remove_topic_producer(topic, id);
  registry_->remove_node_if_unlisted(id);
}

void Lookupd::remove_topic(const std::string& topic) {
  registry_->remove_topic(topic);
}

void Lookupd::set_wrapped(bool wrapped) {
  registry_->set_wrapped(wrapped);
}

polybus::testing::Journal& Lookupd::journal() const {
  return server_->journal();
}

polybus::testing::FaultRules& Lookupd::faults() const {
  return server_->faults();
}

std::uint64_t Lookupd::lookup_count() const {
  return registry_->lookup_count();
}

}  // namespace polybus::nsq::testing
