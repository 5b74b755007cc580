// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <algorithm>

#include "http_session.hpp"
#include "websocketpp_statics.hpp"

namespace polybus::quickio::testing {
namespace {

constexpr std::size_t kMaxHttpHead = 16 * 1024;
constexpr auto kLingerBound = std::chrono::seconds(2);
constexpr auto kTlsHandshakeBound = std::chrono::seconds(5);  // as nsqd

std::size_t max_http_body(const ServerOptions& options) {
  // A body gathers many events; one event alone may be as large as max_event_size.
  return std::max<std::size_t>(16u << 20, options.max_event_size + 1024);
}

bool is_sid(const std::string& sid) {
  return sid.size() == 32 && std::all_of(sid.begin(), sid.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

// A comma-separated header value holds token (case-insensitively).
bool has_token(const std::string* list, std::string_view token) {
  if (!list) return false;
  std::string_view rest(*list);
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.size() == token.size() &&
        std::equal(item.begin(), item.end(), token.begin(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

std::string http_response(int status, std::string_view body, bool close) {
  std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + http::reason_phrase(status) +
      "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 426) out += "Upgrade: websocket\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  out.append(body);
  return out;
}

}  // namespace

// A raw or WebSocket client: its events are written on this connection.
class Connection::StreamPeer final : public Peer {
 public:
  StreamPeer(Connection& connection, Kind peer_kind)
      : Peer(connection.server_, peer_kind), connection_(connection) {}
  void write_event(std::string_view text) override { connection_.send_event(text); }
  void close_transport() override {
    if (kind == Kind::websocket) {
      connection_.websocket_close(websocketpp::close::status::normal, "closed by the server");
    } else {
      connection_.close_gracefully();
    }
  }
  void reset_transport() override { connection_.reset(); }
  void hold_output(std::chrono::milliseconds delay) override { connection_.hold_output(delay); }

 private:
  Connection& connection_;
};

Connection::Connection(ServerImpl& server, asio::ip::tcp::socket socket)
    : server_(server),
      stream_(std::move(socket), server.tls_context_),
      hold_timer_(server.io_.context()),
      raw_decoder_(server.options_.max_event_size),
      http_parser_(kMaxHttpHead, max_http_body(server.options_)) {}

Connection::~Connection() = default;

void Connection::start() {
  stream_.async_handshake(kTlsHandshakeBound, [self = shared_from_this()](std::error_code ec) {
    if (self->terminated_) return;
    if (ec) return self->terminate();
    self->read();
  });
}

void Connection::read() {
  stream_.async_read_some(asio::buffer(buffer_),
                          [self = shared_from_this()](std::error_code ec, std::size_t n) {
                            if (self->terminated_) return;
                            if (ec) return self->terminate();
                            self->server_.bytes_received_ += n;
                            self->received(std::string_view(self->buffer_, n));
                            if (!self->terminated_) self->read();
                          });
}

void Connection::received(std::string_view bytes) {
  switch (mode_) {
    case Mode::sniffing:
      return sniff(bytes);
    case Mode::raw:
      return raw_received(bytes);
    case Mode::websocket:
      return websocket_received(bytes);
    case Mode::http:
      return http_received(bytes);
    case Mode::closing:
      return;  // drained until the peer closes
  }
}

void Connection::sniff(std::string_view bytes) {
  if (sniffed_.empty() && !bytes.empty()) {
    char first = bytes.front();
    if (first >= 'A' && first <= 'Z') {
      mode_ = Mode::http;
      return http_received(bytes);
    }
    if (first != '/') return terminate();
  }
  std::size_t need = kHandshake.size() - sniffed_.size();
  sniffed_.append(bytes.substr(0, need));
  if (kHandshake.substr(0, sniffed_.size()) != sniffed_) return terminate();
  if (sniffed_.size() < kHandshake.size()) return;
  // The rest of these bytes was sent before our answer: dropped, as the real server does.
  mode_ = Mode::raw;
  peer_ = std::make_unique<StreamPeer>(*this, Peer::Kind::raw);
  write_bytes(kHandshake.data(), kHandshake.size());
  server_.add_peer(*peer_);
  peer_registered_ = true;
}

void Connection::raw_received(std::string_view bytes) {
  auto ec = raw_decoder_.feed(bytes, [this](std::string_view frame) {
    if (mode_ == Mode::raw && !server_.handle_event(*peer_, frame)) close_gracefully();
  });
  if (ec && mode_ == Mode::raw) close_gracefully();
}

// ---- WebSocket ----

void Connection::handle_get(std::string_view rest) {
  const http::Request& request = http_parser_.request();
  if (!request.header("upgrade")) {
    bool websocket_headers =
        request.header("sec-websocket-key") || request.header("sec-websocket-version");
    return respond(websocket_headers ? 426 : 405, "", true);
  }
  const std::string* version = request.header("sec-websocket-version");
  if (server_.options_.refuse_websocket || !responses_.empty() ||
      !has_token(request.header("upgrade"), "websocket") || !version || *version != "13" ||
      !has_token(request.header("sec-websocket-protocol"), "quickio")) {
    return respond(400, "", true);
  }
  start_websocket(rest);
}

void Connection::start_websocket(std::string_view rest) {
  mode_ = Mode::websocket;
  std::error_code ec;
  websocket_ = server_.websocket_.server.get_connection();
  std::weak_ptr<Connection> weak = weak_from_this();
  websocket_->set_write_handler(
      [weak](websocketpp::connection_hdl, const char* data, std::size_t size) {
        if (auto self = weak.lock()) self->write_bytes(data, size);
        return std::error_code();
      });
  websocket_->set_validate_handler([weak](websocketpp::connection_hdl) {
    auto self = weak.lock();
    if (!self) return false;
    std::error_code select_ec;
    self->websocket_->select_subprotocol("quickio", select_ec);
    return !select_ec;
  });
  websocket_->set_message_handler(
      [weak](websocketpp::connection_hdl, WebSocketServer::message_ptr message) {
        auto self = weak.lock();
        if (!self) return;
        if (message->get_opcode() != websocketpp::frame::opcode::text)
          return self->websocket_close(websocketpp::close::status::unsupported_data,
                                       "only text frames are supported");
        self->websocket_text(message->get_payload());
      });
  websocket_->set_ping_handler([weak](websocketpp::connection_hdl, std::string) {
    if (auto self = weak.lock())
      self->websocket_close(websocketpp::close::status::unsupported_data, "ping is not supported");
    return false;
  });
  websocket_->set_pong_handler([weak](websocketpp::connection_hdl, std::string) {
    if (auto self = weak.lock())
      self->websocket_close(websocketpp::close::status::unsupported_data, "pong is not supported");
  });
  auto ended = [weak](websocketpp::connection_hdl) {
    if (auto self = weak.lock()) self->close_gracefully();
  };
  websocket_->set_close_handler(ended);
  websocket_->set_fail_handler(ended);
  websocket_->set_max_message_size(server_.options_.max_event_size);
  websocket_->start();
  std::string head = http_parser_.raw_head();
  websocket_received(head);
  if (mode_ == Mode::websocket) websocket_received(rest);
}

void Connection::websocket_received(std::string_view bytes) {
  if (bytes.empty()) return;
  websocket_->read_all(bytes.data(), bytes.size());
  websocket_dropping_ = false;
  auto state = websocket_->get_state();
  if (mode_ == Mode::websocket && (state == websocketpp::session::state::closing ||
                                   state == websocketpp::session::state::closed))
    close_gracefully();
}

void Connection::websocket_text(const std::string& text) {
  if (mode_ != Mode::websocket) return;
  if (!websocket_handshaken_) {
    if (text != kHandshake) return;  // nothing counts before the QuickIO handshake
    websocket_handshaken_ = true;
    // What came in the same read as the handshake was sent before our answer: dropped.
    websocket_dropping_ = true;
    peer_ = std::make_unique<StreamPeer>(*this, Peer::Kind::websocket);
    send_event(kHandshake);
    server_.add_peer(*peer_);
    peer_registered_ = true;
    return;
  }
  if (websocket_dropping_) return;
  if (!server_.handle_event(*peer_, text))
    websocket_close(websocketpp::close::status::policy_violation, "malformed event");
}

void Connection::websocket_close(std::uint16_t code, const std::string& reason) {
  if (mode_ != Mode::websocket) return;
  std::error_code ignored;
  websocket_->close(code, reason, ignored);
  close_gracefully();
}

// ---- HTTP ----

void Connection::http_received(std::string_view bytes) {
  for (;;) {
    if (http_refused_ || mode_ != Mode::http) return;
    auto result = http_parser_.feed(bytes);
    bytes.remove_prefix(result.consumed);
    switch (result.status) {
      case http::RequestReader::Status::need_more:
        return;
      case http::RequestReader::Status::error:
        return respond(result.error_status, "", true);
      case http::RequestReader::Status::head_ready: {
        const http::Request& request = http_parser_.request();
        if (request.method == "GET") return handle_get(bytes);
        if (request.method != "POST") return respond(405, "", true);
        if (!request.content_length) return respond(411, "", true);
        break;
      }
      case http::RequestReader::Status::request_ready:
        http_request();
        http_parser_.next();
        break;
    }
  }
}

void Connection::http_request() {
  const http::Request& request = http_parser_.request();
  auto sid = request.query_parameter("sid");
  bool connect = request.query_parameter("connect") == std::optional<std::string>("true");
  if (!request.keep_alive()) http_refused_ = true;  // closes once its responses are written
  if (!sid || !is_sid(*sid)) return respond(connect ? 400 : 403, "", true);
  auto now = Clock::now();
  if (connect) {
    std::string_view body(request.body);
    if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    if (server_.find_session(*sid)) return respond(403, "", true);
    if (body != "/qio/hostname:1=null") return respond(400, "", true);
    HttpSession& session = server_.open_session(*sid);
    session.last_post = now;
    server_.handle_event(session, body);
    return session.hold(shared_from_this(), add_response_slot());
  }
  HttpSession* session = server_.find_session(*sid);
  if (!session) return respond(403, "", true);
  if (session->ending()) {
    // Ended but for its queue (end_after_delivery): this POST collects it. Its events are
    // dropped, as a closed connection's would be.
    session->hold(shared_from_this(), add_response_slot());
    return server_.end_session(*session);
  }
  session->last_post = now;
  session->last_received = now;
  bool well_formed = true;
  for_each_line(request.body, [&](std::string_view line) {
    if (well_formed && !line.empty()) well_formed = server_.handle_event(*session, line);
  });
  if (!well_formed) {
    server_.end_session(*session);
    return respond(400, "", true);
  }
  session->hold(shared_from_this(), add_response_slot());
}

void Connection::respond(int status, std::string_view body, bool close) {
  if (close) http_refused_ = true;
  responses_.push_back({next_response_id_++, true, http_response(status, body, close)});
  flush_responses();
}

std::uint64_t Connection::add_response_slot() {
  responses_.push_back({next_response_id_, false, {}});
  return next_response_id_++;
}

bool Connection::complete_response(std::uint64_t id, std::string_view body) {
  if (terminated_ || mode_ != Mode::http) return false;
  for (auto& response : responses_) {
    if (response.id != id) continue;
    if (response.ready) return false;
    response.bytes = http_response(200, body, false);
    response.ready = true;
    flush_responses();
    return true;
  }
  return false;
}

void Connection::flush_responses() {
  while (!responses_.empty() && responses_.front().ready) {
    write_bytes(responses_.front().bytes.data(), responses_.front().bytes.size());
    responses_.pop_front();
  }
  if (responses_.empty() && http_refused_) close_gracefully();
}

// ---- writing and closing ----

void Connection::send_event(std::string_view text) {
  if (mode_ == Mode::raw) {
    if (terminated_ || server_.silent_ || overflowed_) return;
    append_raw_frame_header(out_, text.size());
    write_bytes(text.data(), text.size());
  } else if (mode_ == Mode::websocket) {
    websocket_->send(text.data(), text.size(),
                     websocketpp::frame::opcode::text);  // fails only when closing
  }
}

void Connection::write_bytes(const char* data, std::size_t size) {
  if (terminated_ || server_.silent_ || overflowed_) return;
  out_.append(data, size);
  if (out_.size() > kMaxQueuedBytes) {
    // A client that does not read. Terminated later: the caller may be iterating over peers.
    overflowed_ = true;
    asio::post(server_.io_.context(), [self = shared_from_this()] { self->terminate(); });
    return;
  }
  write();
}

void Connection::write() {
  if (write_in_flight_ || terminated_ || output_held_) return;
  if (out_.empty()) {
    if (close_when_flushed_) {
      close_when_flushed_ = false;
      write_in_flight_ = true;  // TLS's close_notify is a write
      stream_.async_shutdown_send([self = shared_from_this()](std::error_code ec) {
        self->write_in_flight_ = false;
        if (self->terminated_) return;
        if (ec) return self->terminate();
        self->write();
      });
    }
    return;
  }
  writing_.swap(out_);
  out_.clear();
  write_in_flight_ = true;
  stream_.async_write(asio::buffer(writing_),
                      [self = shared_from_this()](std::error_code ec, std::size_t n) {
                        self->write_in_flight_ = false;
                        self->writing_.clear();
                        self->server_.bytes_sent_ += n;
                        if (self->terminated_) return;
                        if (ec) return self->terminate();
                        self->write();
                      });
}

void Connection::end_peer() {
  if (!peer_registered_) return;
  peer_registered_ = false;
  server_.peer_gone(*peer_);
}

void Connection::close_gracefully() {
  if (terminated_ || mode_ == Mode::closing) return;
  end_peer();
  mode_ = Mode::closing;
  closing_since_ = Clock::now();
  close_when_flushed_ = true;
  write();
}

bool Connection::lingering_too_long(Clock::time_point now) const {
  return mode_ == Mode::closing && !terminated_ && now - closing_since_ > kLingerBound;
}

void Connection::terminate() {
  if (terminated_) return;
  terminated_ = true;
  auto self = shared_from_this();  // forget() may drop the last owner
  hold_timer_.cancel();
  end_peer();
  stream_.close();
  server_.forget(this);
}

void Connection::reset() {
  if (terminated_) return;
  stream_.reset();
  terminate();
}

void Connection::hold_output(std::chrono::milliseconds delay) {
  output_held_ = true;
  hold_timer_.expires_after(delay);
  hold_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->terminated_) return;  // cancelled, or a later delay took over
    self->output_held_ = false;
    self->write();
  });
}

}  // namespace polybus::quickio::testing
