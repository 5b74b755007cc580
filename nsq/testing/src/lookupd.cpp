// The test nsqlookupd: its HTTP interface (GET /lookup, /ping, /info) served from a LookupRegistry
// on an io thread of its own, with the status codes, headers and bodies nsqlookupd 1.3 sends.
#include <asio/ip/tcp.hpp>
#include <memory>
#include <optional>

#include "go_query.hpp"
#include "http_server.hpp"
#include "polybus/adapter/io_thread.hpp"
#include "lookup_registry.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing {
namespace detail {

class LookupdServer {
 public:
  LookupdServer(std::shared_ptr<LookupRegistry> registry, std::uint16_t port)
      : registry_(std::move(registry)) {
    io_.run([this, port] {
      const asio::ip::tcp::endpoint endpoint(asio::ip::make_address_v4("127.0.0.1"), port);
      // nsqlookupd's endpoints take no body worth keeping; 1 MiB bounds what it reads anyway.
      http_.emplace(io_.context(), endpoint, 1024 * 1024,
                    HttpServer::Handlers{{}, [this](const http::Request& r) { return respond(r); }});
      port_ = http_->port();
    });
  }

  ~LookupdServer() {
    io_.run([this] { http_.reset(); });
    io_.join();
  }

  std::uint16_t port() const { return port_; }

  HttpResponse respond(const http::Request& request) {
    const bool known = request.path == "/ping" || request.path == "/lookup" ||
                       request.path == "/info" || request.path == "/nodes";
    if (!known) return v1_error(404, "NOT_FOUND");
    if (request.method != "GET") return v1_method_not_allowed("GET, OPTIONS");
    if (request.path == "/ping") return HttpResponse{200, "text/plain; charset=utf-8", false, "OK", {}};
    if (request.path == "/info") return v1_json(R"({"version":"1.3.0"})");
    if (request.path == "/nodes") {
      const LookupResult nodes = registry_->nodes();
      return HttpResponse{nodes.status, "application/json; charset=utf-8", true, nodes.json, {}};
    }
    bool valid = true;
    const std::optional<std::string> topic = query_value(request.query, "topic", valid);
    if (!valid) return v1_error(400, "INVALID_REQUEST");
    if (!topic) return v1_error(400, "MISSING_ARG_TOPIC");
    const LookupResult result = registry_->lookup(*topic);
    return HttpResponse{result.status, "application/json; charset=utf-8", true, result.json, {}};
  }

 private:
  IoThread io_;  // first: destroyed last
  std::shared_ptr<LookupRegistry> registry_;
  std::optional<HttpServer> http_;
  std::uint16_t port_ = 0;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Lookupd

std::unique_ptr<Lookupd> Lookupd::start(std::uint16_t http_port) {
  return std::unique_ptr<Lookupd>(new Lookupd(http_port));
}

Lookupd::Lookupd(std::uint16_t http_port)
    : registry_(std::make_shared<detail::LookupRegistry>()),
      server_(std::make_unique<detail::LookupdServer>(registry_, http_port)) {}

Lookupd::~Lookupd() = default;

std::uint16_t Lookupd::http_port() const {
  return server_->port();
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

std::uint64_t Lookupd::lookup_count() const {
  return registry_->lookup_count();
}

}  // namespace polybus::nsq::testing
