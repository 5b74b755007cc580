// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <asio/post.hpp>

#include "http_link.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"
#include "raw_wire.hpp"
#include "stream_link.hpp"
#include "ws_wire.hpp"

namespace polybus::quickio::detail {
namespace {

constexpr std::uint16_t kDefaultPort = 8080;

const char* carrier_name(Carrier c) {
  switch (c) {
    case Carrier::raw:
      return "raw TCP";
    case Carrier::websocket:
      return "WebSocket";
    case Carrier::http:
      return "HTTP long polling";
  }
  return "?";
}

}  // namespace

ConnectionSettings ConnectionSettings::from(const Url& url, const ResolvedOptions& options) {
  ConnectionSettings s;
  if (url.scheme == "quickio")
    s.carrier = Carrier::raw;
  else if (url.scheme == "quickio+ws")
    s.carrier = Carrier::websocket;
  else if (url.scheme == "quickio+http")
    s.carrier = Carrier::http;
  else
    throw Error(polybus::errc::invalid_url, "quickio: unknown scheme '" + url.scheme + "'");
  auto hosts = url.hosts_or_throw(kDefaultPort);
  if (hosts.size() != 1)
    throw Error(polybus::errc::invalid_url, "quickio: one server address expected (" + url.scheme +
                                                "://host:port), not " +
                                                std::to_string(hosts.size()));
  s.address = hosts.front();
  s.path = url.path;
  s.heartbeat_timeout = options.get_duration("heartbeat_timeout");
  s.http_poll_delay_max = options.get_duration("http_poll_delay_max");
  s.http_fallback = options.get_bool("http_fallback");
  s.http_request_timeout = options.get_duration("http_request_timeout");
  s.handshake_timeout = options.get_duration("connect_timeout");
  s.max_queued_bytes = static_cast<std::size_t>(options.get_int("max_queued_bytes"));
  s.max_frame_size = static_cast<std::size_t>(options.get_int("max_frame_size"));
  s.max_redirects = static_cast<std::uint32_t>(options.get_int("max_redirects"));
  s.max_json_depth = static_cast<std::size_t>(options.get_int("max_json_depth"));
  s.transport = TransportSettings::from_options(options);
  return s;
}

Connection::Connection(const Strand& strand, ConnectionSettings settings, Backoff backoff,
                       ConnectionHooks hooks, const AdapterContext* stats)
    : strand_(strand),
      settings_(std::move(settings)),
      hooks_(std::move(hooks)),
      machine_(MachineLimits{settings_.max_queued_bytes, settings_.max_json_depth}, *this),
      reconnect_(strand, std::move(backoff), settings_.address.to_string(),
                 ReconnectLoop::Reports{[this](const StateEvent& e) {
                                          if (hooks_.state)
                                            hooks_.state(e.state, e.endpoint, e.reason, e.detail,
                                                         e.retry_in);
                                        },
                                        [this] {
                                          if (stats_) stats_->count_reconnect();
                                        }},
                 stats ? stats->clock() : nullptr),
      heartbeat_timer_(strand),
      address_(settings_.address) {
  if (stats) stats_.emplace(*stats);
}

Connection::~Connection() {
  if (link_) link_->close();
}

void Connection::start() {
  asio::post(strand_, [self = shared_from_this()] { self->connect(); });
}

void Connection::send(std::string_view text, SentFn sent, ExpiredFn expired) {
  // A send completes when its bytes reach the socket: a publisher waiting on completions is
  // paced by the connection.
  if (link_ && link_open_) {
    in_send_ = true;
    link_->send(text, WrittenFn(std::move(sent), std::move(expired)));
    in_send_ = false;
  } else if (sent) {
    sent(make_error_code(polybus::errc::disconnected));
  }
}

void Connection::update_counters() {
  queued_bytes_.store(machine_.queued_bytes());
  if (stats_) stats_->waiting_publishes(machine_.queued_events());
  open_connection_.store(machine_.is_open() ? machine_.connection() : 0);
}

void Connection::connect() {
  if (closed_ || link_) return;
  current_carrier_ =
      settings_.carrier == Carrier::websocket && use_http_ ? Carrier::http : settings_.carrier;
  const AdapterContext* stats = stats_ ? &*stats_ : nullptr;
  if (current_carrier_ == Carrier::http) {
    HttpLinkSettings http;
    http.path = settings_.path;
    http.poll_delay_max = settings_.http_poll_delay_max;
    http.request_timeout = settings_.http_request_timeout;
    http.max_response_size = settings_.max_frame_size;
    TransportSettings transport = settings_.transport;
    transport.protocol = "HTTP";
    link_ = std::make_shared<HttpLink>(strand_, transport, address_, http, *this, stats);
  } else {
    // Raw QuickIO opens with /qio/ohai; WebSocket with an HTTP upgrade answer.
    TransportSettings transport = settings_.transport;
    transport.protocol = current_carrier_ == Carrier::raw ? "QuickIO" : "HTTP";
    auto link = std::make_shared<StreamLink>(strand_, transport, address_,
                                             settings_.handshake_timeout, *this, stats);
    if (current_carrier_ == Carrier::raw)
      link->set_wire(std::make_unique<RawWire>(settings_.max_frame_size, *link));
    else
      link->set_wire(std::make_unique<WsWire>(address_.to_string(), settings_.path,
                                              settings_.max_frame_size, *link));
    link_ = std::move(link);
  }
  link_open_ = false;
  reconnect_.attempting();
  log(LogLevel::debug,
      "quickio: connecting to " + address_.to_string() + " over " + carrier_name(current_carrier_));
  link_->start();
}

void Connection::retire_link() {
  if (!link_) return;
  link_->close();
  // Released later: the link may be the caller of the code that retires it.
  asio::post(strand_, [link = std::move(link_)] {});
  link_.reset();
  link_open_ = false;
  heartbeat_timer_.cancel();
}

void Connection::on_link_open(Link* link) {
  if (link != link_.get() || closed_) return;
  link_open_ = true;
  moving_ = false;
  last_activity_ = Clock::now();
  arm_heartbeat();
  reconnect_.connected();
  open_connection_.store(machine_.connection() + 1);  // as /open's listeners will see it
  machine_.opened();
  update_counters();
}

void Connection::on_link_event(Link* link, std::string_view text,
                               const std::shared_ptr<const void>& owner) {
  if (link != link_.get() || !link_open_) return;
  std::string why;
  auto ec = machine_.receive(text, owner, &why);
  if (!ec && !moving_ && link == link_.get()) {
    redirects_ = 0;
    reconnect_.proven();
  }
  update_counters();
  if (ec && link == link_.get()) {
    if (hooks_.error) hooks_.error(ec, "quickio: bad event from " + link->endpoint() + ": " + why);
    link->fail(ec, link->endpoint() + ": " + why);  // the real server, too, closes on one
  }
}

void Connection::on_link_activity(Link* link) {
  if (link == link_.get()) last_activity_ = Clock::now();
}

void Connection::on_link_write_room(Link* link) {
  if (link == link_.get()) machine_.flush_queue();
}

void Connection::on_link_closed(Link* link, std::error_code ec, const std::string& detail,
                                bool refused) {
  if (link != link_.get()) return;
  if (in_send_) {
    asio::post(strand_, [weak = weak_from_this(), held = link_, ec, detail, refused] {
      if (auto self = weak.lock()) self->on_link_closed(held.get(), ec, detail, refused);
    });
    return;
  }
  bool was_open = link_open_;
  last_end_ = detail;  // before the callbacks it fails hear of it
  std::vector<UnsentEvent> unsent = link->take_unsent();
  retire_link();
  open_connection_.store(0);  // before /close's listeners run
  if (was_open) machine_.closed();
  if (!unsent.empty()) {
    // Never written, so never seen by the server: they go on the next link, not fail.
    std::vector<Machine::Queued> events;
    events.reserve(unsent.size());
    for (auto& event : unsent)
      events.push_back(
          {std::move(event.text), std::move(event.written.fn), std::move(event.written.expired)});
    machine_.requeue(std::move(events));
  }
  update_counters();
  if (closed_) return;
  reconnect_.ended(ec, detail);
  if (!moving_) machine_.emit_local("/error", text::json_quote(detail));
  if (closed_ || link_) return;  // a listener closed or reconnected
  std::weak_ptr<Connection> weak = shared_from_this();
  auto now = [weak] {
    if (auto self = weak.lock()) self->connect();
  };
  const bool moved = moving_;
  moving_ = false;  // a move that cannot connect backs off like any failed attempt
  if (moved) {
    // Followed at once while moves are few and not in a row; a run of them is a loop, paced by
    // the backoff (ReconnectLoop::move), and said so.
    if (reconnect_.move() && redirects_ <= 1)
      return reconnect_.retry_now(ec, detail, now);  // as transparent as a reconnect
    std::string loop = detail;
    if (reconnect_.recent_moves() > ReconnectLoop::kMovesAtOnce) {
      loop = "moved in a loop: " + std::to_string(reconnect_.recent_moves()) +
             " moves, each within " + std::to_string(ReconnectLoop::kMoveWindow.count()) +
             "ms of the last, the latest to " + address_.to_string() +
             "; each move now waits the reconnect backoff";
      log(LogLevel::warn, "quickio: " + loop);
    }
    reconnect_.retry(ec, loop, now);
  } else if (!was_open && address_.to_string() != settings_.address.to_string()) {
    // The address a move gave cannot be reached: back to the one the client was given, after
    // the backoff.
    log(LogLevel::info, "quickio: " + address_.to_string() + " (from a move) cannot be reached (" +
                            detail + "); back to " + settings_.address.to_string());
    address_ = settings_.address;
    reconnect_.set_endpoint(address_.to_string());
    reconnect_.retry(ec, detail, now);
  } else if (refused && settings_.carrier == Carrier::websocket && !use_http_ &&
             settings_.http_fallback) {
    use_http_ = true;  // the document: fall back to HTTP at once
    log(LogLevel::info, "quickio: WebSocket refused (" + detail + "); falling back to HTTP");
    reconnect_.retry_now(ec, detail, now);
  } else {
    use_http_ = false;  // the next attempt tries WebSocket again
    reconnect_.retry(ec, detail, now);
  }
}

void Connection::move_to(const std::string& address) {
  HostAnswer parsed;
  if (!parse_host_answer(address, parsed)) {
    if (hooks_.error)
      hooks_.error(make_error_code(codec_errc::invalid_json),
                   "quickio: /qio/move to an address that cannot be used: " + address);
    return;
  }
  if (++redirects_ > settings_.max_redirects) {
    auto text = limit_exceeded_text("quickio: /qio/move to " + address + " refused, moves in a row",
                                    "max_redirects", settings_.max_redirects, redirects_);
    if (hooks_.error) hooks_.error(make_error_code(polybus::errc::limit_exceeded), text);
    if (link_) link_->fail(make_error_code(polybus::errc::limit_exceeded), text);
    return;
  }
  address_.host = parsed.host;
  if (parsed.port != 0) address_.port = parsed.port;
  reconnect_.set_endpoint(address_.to_string());
  moving_ = true;
  log(LogLevel::info, "quickio: moving to " + address_.to_string());
  if (link_) link_->fail(make_error_code(client_errc::moved), "moved to " + address_.to_string());
}

void Connection::subscription_refused(const std::string& path, int code,
                                      const std::string& err_msg) {
  if (hooks_.subscription_refused) hooks_.subscription_refused(path, code, err_msg);
}

void Connection::reconnect() {
  if (closed_) return;
  reconnect_.cancel();
  bool was_open = link_open_;
  retire_link();
  open_connection_.store(0);
  if (was_open) machine_.closed();
  update_counters();
  use_http_ = false;
  if (!closed_ && !link_) connect();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  reconnect_.cancel();
  retire_link();
  open_connection_.store(0);
  machine_.shut_down();
  update_counters();
  state(ConnectionState::closed);
}

void Connection::arm_heartbeat() {
  if (settings_.heartbeat_timeout.count() <= 0) return;
  heartbeat_timer_.expires_at(last_activity_ + settings_.heartbeat_timeout);
  heartbeat_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->link_open_) return;
    if (Clock::now() - self->last_activity_ < self->settings_.heartbeat_timeout)
      return self->arm_heartbeat();  // something arrived since: wait from then
    self->link_->fail(make_error_code(client_errc::heartbeat_timeout),
                      self->link_->endpoint() + ": no whole frame for " +
                          std::to_string(self->settings_.heartbeat_timeout.count()) +
                          "ms (heartbeat_timeout)");
  });
}

void Connection::state(ConnectionState s, std::error_code reason, const std::string& detail,
                       std::chrono::milliseconds retry_in) {
  if (hooks_.state) hooks_.state(s, address_.to_string(), reason, detail, retry_in);
}

void Connection::log(LogLevel level, const std::string& text) {
  if (hooks_.log) hooks_.log(level, text);
}

}  // namespace polybus::quickio::detail
