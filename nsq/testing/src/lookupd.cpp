// The test nsqlookupd: its HTTP interface (GET /lookup, /ping, /info) served from a LookupRegistry
// on an io thread of its own, with the status codes, headers and bodies nsqlookupd 1.3 sends.
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>

#include "go_query.hpp"
#include "polybus/adapter/http.hpp"
#include "polybus/adapter/io_thread.hpp"
#include "lookup_registry.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing {
namespace detail {
namespace {

struct HttpResponse {
  int status = 200;
  std::string content_type;  // empty: none
  bool nsq_content_type = true;
  std::string body;
  std::string allow;  // the Allow header of a 405
};

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Request Entity Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
  }
  return "Error";
}

std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

// nsqlookupd's V1 error form: {"message":"..."}.
HttpResponse json_error(int status, const std::string& message) {
  return HttpResponse{status, "application/json; charset=utf-8", true,
                      "{\"message\":\"" + message + "\"}"};
}

std::string serialize(const HttpResponse& response, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status) + "\r\n";
  if (!response.content_type.empty()) out += "Content-Type: " + response.content_type + "\r\n";
  if (!response.allow.empty()) out += "Allow: " + response.allow + "\r\n";
  if (response.nsq_content_type) out += "X-Nsq-Content-Type: nsq; version=1.0\r\n";
  out += "Date: " + http_date() + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += response.body;
  return out;
}

}  // namespace

class LookupdServer {
 public:
  LookupdServer(std::shared_ptr<LookupRegistry> registry, std::uint16_t port)
      : registry_(std::move(registry)), acceptor_(io_.context()) {
    io_.run([this, port] {
      const asio::ip::tcp::endpoint endpoint(asio::ip::make_address_v4("127.0.0.1"), port);
      acceptor_.open(endpoint.protocol());
      acceptor_.set_option(asio::socket_base::reuse_address(true));
      acceptor_.bind(endpoint);
      acceptor_.listen();
      port_ = acceptor_.local_endpoint().port();
      accept();
    });
  }

  ~LookupdServer() {
    io_.run([this] {
      std::error_code ignored;
      acceptor_.close(ignored);
      const auto connections = connections_;
      for (const auto& [id, connection] : connections) connection->close();
      connections_.clear();
    });
    io_.join();
  }

  std::uint16_t port() const { return port_; }

  HttpResponse respond(const http::Request& request) {
    const bool known =
        request.path == "/ping" || request.path == "/lookup" || request.path == "/info" ||
        request.path == "/nodes";
    if (!known) return json_error(404, "NOT_FOUND");
    if (request.method != "GET") {
      HttpResponse refused = json_error(405, "METHOD_NOT_ALLOWED");
      refused.allow = "GET, OPTIONS";  // as nsqlookupd's router lists them
      return refused;
    }
    if (request.path == "/ping") return HttpResponse{200, "text/plain; charset=utf-8", false, "OK"};
    if (request.path == "/info") {
      return HttpResponse{200, "application/json; charset=utf-8", true, R"({"version":"1.3.0"})"};
    }
    if (request.path == "/nodes") {
      const LookupResult nodes = registry_->nodes();
      return HttpResponse{nodes.status, "application/json; charset=utf-8", true, nodes.json};
    }
    bool valid = true;
    const std::optional<std::string> topic = query_value(request.query, "topic", valid);
    if (!valid) return json_error(400, "INVALID_REQUEST");
    if (!topic) return json_error(400, "MISSING_ARG_TOPIC");
    const LookupResult result = registry_->lookup(*topic);
    return HttpResponse{result.status, "application/json; charset=utf-8", true, result.json};
  }

 private:
  class Connection : public std::enable_shared_from_this<Connection> {
   public:
    Connection(LookupdServer& server, asio::ip::tcp::socket socket, std::uint64_t id)
        : server_(server), socket_(std::move(socket)), id_(id), buffer_(16 * 1024) {}

    void start() { read(); }

    void close() {
      if (closed_) return;
      closed_ = true;
      std::error_code ignored;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
      server_.connections_.erase(id_);
    }

   private:
    // A client that pipelines requests without reading the answers is not read from while
    // kMaxQueuedResponses wait for it.
    static constexpr std::size_t kMaxQueuedResponses = 64;

    void read() {
      if (closed_ || closing_ || reading_ || queue_.size() >= kMaxQueuedResponses) return;
      reading_ = true;
      socket_.async_read_some(
          asio::buffer(buffer_),
          [self = shared_from_this()](std::error_code ec, std::size_t n) { self->on_read(ec, n); });
    }

    void on_read(std::error_code ec, std::size_t size) {
      reading_ = false;
      if (closed_) return;
      if (ec) return close();
      std::string_view input(buffer_.data(), size);
      // Until the reader wants more: a request without a body is ready with no further byte.
      while (!closing_) {
        const http::RequestReader::Result result = reader_.feed(input);
        input.remove_prefix(result.consumed);
        if (result.status == http::RequestReader::Status::need_more) break;
        if (result.status == http::RequestReader::Status::head_ready) {
          // nsqlookupd's endpoints take no body; this one does not read chunked ones.
          if (reader_.request().chunked) refuse(501);
          continue;
        }
        if (result.status == http::RequestReader::Status::error) {
          refuse(result.error_status);
          break;
        }
        const http::Request& request = reader_.request();
        send(server_.respond(request), request.keep_alive());
        reader_.next();
      }
      read();
    }

    // Answers what the reader refused, and closes.
    void refuse(int status) {
      const char* text = status == 413   ? "413 Request Entity Too Large"
                         : status == 431 ? "431 Request Header Fields Too Large"
                         : status == 501 ? "501 Not Implemented"
                                         : "400 Bad Request";
      send(HttpResponse{status, "text/plain; charset=utf-8", false, text}, false);
    }

    void send(const HttpResponse& response, bool keep_alive) {
      if (!keep_alive) closing_ = true;
      queue_.push_back(serialize(response, keep_alive));
      write();
    }

    void write() {
      if (writing_ || queue_.empty() || closed_) return;
      writing_ = true;
      asio::async_write(socket_, asio::buffer(queue_.front()),
                        [self = shared_from_this()](std::error_code ec, std::size_t) {
                          self->writing_ = false;
                          self->queue_.pop_front();
                          if (ec) return self->close();
                          if (!self->queue_.empty()) self->write();
                          if (self->queue_.empty() && self->closing_) return self->close();
                          self->read();
                        });
    }

    LookupdServer& server_;
    asio::ip::tcp::socket socket_;
    std::uint64_t id_;
    std::vector<char> buffer_;
    http::RequestReader reader_{16 * 1024, 1024 * 1024};
    std::deque<std::string> queue_;
    bool reading_ = false;
    bool writing_ = false;
    bool closing_ = false;  // answer what is queued, then close
    bool closed_ = false;
  };

  void accept() {
    acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
      if (ec) {
        if (ec != asio::error::operation_aborted && acceptor_.is_open()) accept();
        return;
      }
      socket.set_option(asio::ip::tcp::no_delay(true), ec);
      const std::uint64_t id = ++next_id_;
      auto connection = std::make_shared<Connection>(*this, std::move(socket), id);
      connections_.emplace(id, connection);
      connection->start();
      accept();
    });
  }

  IoThread io_;  // first: destroyed last
  std::shared_ptr<LookupRegistry> registry_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections_;
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
