#include "lookupd_tcp.hpp"

#include <rapidjson/document.h>

#include <asio/write.hpp>
#include <deque>
#include <vector>

#include "go_text.hpp"
#include "nsqd_server.hpp"
#include "polybus/adapter/big_endian.hpp"
#include "polybus/nsq/codec.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// nsqlookupd reads lines without a bound; this one closes a connection whose line passes it.
constexpr std::size_t kMaxLine = 16 * 1024;
// And an IDENTIFY body past this (nsqlookupd allocates whatever size it is sent).
constexpr std::int32_t kMaxIdentifyBody = 1024 * 1024;

std::string framed(std::string_view data) {
  std::string out;
  append_big_endian<4>(out, data.size());
  out.append(data);
  return out;
}

std::vector<std::string> split_spaces(std::string_view line) {
  std::vector<std::string> params;
  while (true) {
    const auto space = line.find(' ');
    params.emplace_back(line.substr(0, space));
    if (space == std::string_view::npos) return params;
    line.remove_prefix(space + 1);
  }
}

std::string_view trim_space(std::string_view text) {
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
  };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

// A JSON integer field into `out`; false when present with another type.
bool read_port(const rapidjson::Value& object, const char* name, std::uint16_t& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd() || member->value.IsNull()) return true;
  if (!member->value.IsInt64()) return false;
  const std::int64_t value = member->value.GetInt64();
  out = value > 0 && value <= 65535 ? static_cast<std::uint16_t>(value) : 0;
  return true;
}

bool read_string(const rapidjson::Value& object, const char* name, std::string& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd() || member->value.IsNull()) return true;
  if (!member->value.IsString()) return false;
  out.assign(member->value.GetString(), member->value.GetStringLength());
  return true;
}

}  // namespace

class LookupdTcpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(LookupdTcpServer& server, asio::ip::tcp::socket socket, std::uint64_t id)
      : server_(server), socket_(std::move(socket)), id_(id), buffer_(16 * 1024) {
    std::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    if (!ec) remote_ = remote.address().to_string() + ":" + std::to_string(remote.port());
  }

  void start() { read(); }

  void close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    if (identified_) server_.registry_->remove_producer(remote_);
    server_.connections_.erase(id_);
  }

 private:
  enum class State { magic, line, identify_size, identify_body };

  void read() {
    if (closed_ || closing_) return;
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (self->closed_) return;
                              if (ec) return self->close();
                              self->input_.append(self->buffer_.data(), n);
                              self->process();
                              self->read();
                            });
  }

  void process() {
    std::size_t used = 0;
    while (!closing_) {
      const std::string_view rest = std::string_view(input_).substr(used);
      if (state_ == State::magic) {
        if (rest.size() < 4) break;
        used += 4;
        if (rest.substr(0, 4) != "  V1") {
          fatal("E_BAD_PROTOCOL");
          break;
        }
        state_ = State::line;
      } else if (state_ == State::line) {
        const auto end = rest.find('\n');
        if (end == std::string_view::npos) {
          if (rest.size() > kMaxLine) close_after("E_INVALID line too long");
          break;
        }
        used += end + 1;
        command(split_spaces(trim_space(rest.substr(0, end))));
      } else if (state_ == State::identify_size) {
        if (rest.size() < 4) break;
        used += 4;
        const auto size =
            static_cast<std::int32_t>(static_cast<std::uint32_t>(read_big_endian(rest.data(), 4)));
        if (size < 0 || size > kMaxIdentifyBody) {
          fatal("E_BAD_BODY IDENTIFY failed to read body");
          break;
        }
        body_size_ = static_cast<std::size_t>(size);
        state_ = State::identify_body;
      } else {
        if (rest.size() < body_size_) break;
        used += body_size_;
        identify_body(rest.substr(0, body_size_));
        state_ = State::line;
      }
    }
    input_.erase(0, used);
  }

  void command(const std::vector<std::string>& params) {
    const std::string& name = params[0];
    if (name == "PING") {
      if (identified_) server_.registry_->ping(remote_);
      return send("OK");
    }
    if (name == "IDENTIFY") {
      if (identified_) return fatal("E_INVALID cannot IDENTIFY again");
      state_ = State::identify_size;
      return;
    }
    if (name == "REGISTER" || name == "UNREGISTER") {
      if (!identified_) return fatal("E_INVALID client must IDENTIFY");
      if (params.size() < 2) return fatal("E_INVALID " + name + " insufficient number of params");
      const std::string& topic = params[1];
      const std::string channel = params.size() >= 3 ? params[2] : "";
      if (!valid_topic_name(topic)) {
        return fatal("E_BAD_TOPIC " + name + " topic name '" + topic + "' is not valid");
      }
      if (!channel.empty() && !valid_channel_name(channel)) {
        return fatal("E_BAD_CHANNEL " + name + " channel name '" + channel + "' is not valid");
      }
      if (name == "REGISTER") {
        server_.registry_->register_producer(remote_, topic, channel);
      } else {
        server_.registry_->unregister_producer(remote_, topic, channel);
      }
      return send("OK");
    }
    fatal("E_INVALID invalid command " + name);
  }

  void identify_body(std::string_view body) {
    rapidjson::Document document;
    document.Parse(body.data(), body.size());
    ProducerInfo peer;
    if (document.HasParseError() || !document.IsObject() ||
        !read_string(document, "broadcast_address", peer.broadcast_address) ||
        !read_string(document, "hostname", peer.hostname) ||
        !read_string(document, "version", peer.version) ||
        !read_port(document, "tcp_port", peer.tcp_port) ||
        !read_port(document, "http_port", peer.http_port)) {
      return fatal("E_BAD_BODY IDENTIFY failed to decode JSON body");
    }
    if (peer.broadcast_address.empty() || peer.tcp_port == 0 || peer.http_port == 0 ||
        peer.version.empty()) {
      return fatal("E_BAD_BODY IDENTIFY missing fields");
    }
    peer.remote_address = remote_;
    peer.connection_id = remote_;
    server_.registry_->identify(peer, true);
    identified_ = true;
    // Go's encoding/json writes a map's keys in order.
    send("{\"broadcast_address\":" + go_json_string(server_.broadcast_address_) + ",\"hostname\":" +
         go_json_string(host_name()) + ",\"http_port\":" + std::to_string(server_.http_port_) +
         ",\"tcp_port\":" + std::to_string(server_.port_) + ",\"version\":\"1.3.0\"}");
  }

  void send(std::string_view data) {
    queue_.push_back(framed(data));
    write();
  }

  // nsqlookupd answers every error with its text, then closes.
  void fatal(const std::string& text) { close_after(text); }
  void close_after(const std::string& text) {
    send(text);
    closing_ = true;
  }

  void write() {
    if (writing_ || queue_.empty() || closed_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](std::error_code ec, std::size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        self->queue_.pop_front();
                        if (ec) return self->close();
                        if (!self->queue_.empty()) return self->write();
                        if (self->closing_) return self->close();
                      });
  }

  LookupdTcpServer& server_;
  asio::ip::tcp::socket socket_;
  std::uint64_t id_;
  std::string remote_;
  std::vector<char> buffer_;
  std::string input_;
  std::deque<std::string> queue_;
  State state_ = State::magic;
  std::size_t body_size_ = 0;
  bool identified_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

LookupdTcpServer::LookupdTcpServer(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint,
                                   std::shared_ptr<LookupRegistry> registry,
                                   std::string broadcast_address)
    : acceptor_(io),
      registry_(std::move(registry)),
      broadcast_address_(std::move(broadcast_address)) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  accept();
}

LookupdTcpServer::~LookupdTcpServer() {
  close();
}

void LookupdTcpServer::close() {
  std::error_code ignored;
  acceptor_.close(ignored);
  const auto connections = connections_;
  for (const auto& [id, connection] : connections) connection->close();
  connections_.clear();
}

void LookupdTcpServer::accept() {
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

}  // namespace polybus::nsq::testing::detail
