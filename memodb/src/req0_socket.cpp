// SPDX-License-Identifier: Apache-2.0
#include "req0_socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <algorithm>
#include <array>
#include <asio/connect.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <random>

#include "polybus/error.hpp"

namespace polybus::memodb::detail {

using polybus::errc;

namespace {

// TCP_NODELAY on the generic socket (NNG sets it too): a request is one write, and waiting to
// coalesce it with the next only adds latency.
struct NoDelay {
  int value = 1;
  template <typename Protocol>
  int level(const Protocol&) const {
    return IPPROTO_TCP;
  }
  template <typename Protocol>
  int name(const Protocol&) const {
    return TCP_NODELAY;
  }
  template <typename Protocol>
  const int* data(const Protocol&) const {
    return &value;
  }
  template <typename Protocol>
  std::size_t size(const Protocol&) const {
    return sizeof value;
  }
};

}  // namespace

struct Req0Socket::Link {
  explicit Link(const Strand& strand)
      : socket(strand),
        resolver(strand),
        timer(strand),
        frame_timer(strand),
        write_timer(strand),
        decoder(sp::Carrier::tcp, 0) {}
  asio::generic::stream_protocol::socket socket;
  asio::ip::tcp::resolver resolver;
  asio::steady_timer timer;        // the connect and the SP headers
  asio::steady_timer frame_timer;  // a message begun and not finished (frame_timeout)
  bool frame_timer_armed = false;
  // A write that makes no progress (write_timeout). A watchdog, not a timer per write: armed
  // when a write starts and none is armed, it looks at the write under way when it fires (and
  // waits again for that one's time), so a stream of writes resets no timer per write.
  asio::steady_timer write_timer;
  bool write_timer_armed = false;
  std::chrono::steady_clock::time_point write_started;
  std::vector<asio::ip::tcp::endpoint> endpoints;
  std::size_t next_endpoint = 0;
  std::string last_error;
  char peer_header[sp::kHeaderSize] = {};
  char buffer[64 * 1024];
  sp::FrameDecoder decoder;
};

Req0Socket::Req0Socket(const Strand& strand, Req0Settings settings, Events events)
    : strand_(strand),
      settings_(std::move(settings)),
      events_(std::move(events)),
      id_counter_(static_cast<std::uint32_t>(std::random_device{}())),
      deadline_timer_(strand_) {
  const std::string& a = settings_.address;
  if (a.rfind("ipc://", 0) == 0 && a.size() > 6) {
    carrier_ = sp::Carrier::ipc;
    path_ = a.substr(6);
  } else if (a.rfind("tcp://", 0) == 0) {
    carrier_ = sp::Carrier::tcp;
    const std::string host_port = a.substr(6);
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos || colon + 1 == host_port.size())
      throw Error(make_error_code(errc::invalid_url), "memodb: no port in '" + a + "'");
    host_ = host_port.substr(0, colon);
    if (host_.size() > 1 && host_.front() == '[' && host_.back() == ']')
      host_ = host_.substr(1, host_.size() - 2);
    port_ = host_port.substr(colon + 1);
  } else {
    throw Error(make_error_code(errc::invalid_url),
                "memodb: cannot use '" + a + "' (tcp://host:port or ipc:///path)");
  }
}

// ---- the connection ----

void Req0Socket::connect() {
  if (closed_ || link_) return;
  start_attempt();
}

void Req0Socket::start_attempt() {
  auto link = std::make_shared<Link>(strand_);
  link->decoder = sp::FrameDecoder(carrier_, settings_.max_message);
  link_ = link;
  auto self = shared_from_this();
  link->timer.expires_after(settings_.connect_timeout);
  link->timer.async_wait([self, link](std::error_code ec) {
    if (ec || link != self->link_ || self->up_) return;
    self->link_ended(make_error_code(errc::timeout),
                     "cannot connect to " + self->settings_.address + ": no SP connection within " +
                         std::to_string(self->settings_.connect_timeout.count()) + "ms" +
                         (link->last_error.empty() ? "" : " (" + link->last_error + ")"));
  });
  // Once the socket is connected: our header out, theirs in.
  auto on_connected = [self, link]() {
    if (self->carrier_ == sp::Carrier::tcp) {
      std::error_code ignored;
      link->socket.set_option(NoDelay{}, ignored);
    }
    self->writes_.push_back(Write{sp::connection_header(sp::Protocol::req0), nullptr, 0});
    self->write_next();
    asio::async_read(
        link->socket, asio::buffer(link->peer_header),
        [self, link](std::error_code ec, std::size_t) {
          if (link != self->link_) return;
          if (ec)
            return self->link_ended(make_error_code(errc::connect_failed),
                                    "cannot connect to " + self->settings_.address +
                                        ": the connection ended before the SP "
                                        "header came (" +
                                        ec.message() + ")");
          std::string why;
          if (sp::check_connection_header(std::string_view(link->peer_header, sp::kHeaderSize),
                                          sp::Protocol::rep0, &why))
            return self->link_ended(make_error_code(errc::protocol_error),
                                    "cannot connect to " + self->settings_.address + ": " + why);
          self->link_up();
        });
  };
  if (carrier_ == sp::Carrier::ipc) {
    link->socket.async_connect(
        asio::local::stream_protocol::endpoint(path_),
        [self, link, on_connected](std::error_code ec) {
          if (link != self->link_) return;
          if (ec)
            return self->link_ended(
                make_error_code(errc::connect_failed),
                "cannot connect to " + self->settings_.address + ": " + ec.message());
          on_connected();
        });
    return;
  }
  // TCP: each address the name resolves to, in turn.
  auto try_next = std::make_shared<std::function<void()>>();
  *try_next = [self, link, on_connected, weak_next = std::weak_ptr(try_next)]() {
    if (link != self->link_) return;
    if (link->next_endpoint >= link->endpoints.size())
      return self->link_ended(make_error_code(errc::connect_failed),
                              "cannot connect to " + self->settings_.address + ": " +
                                  (link->last_error.empty() ? "no address" : link->last_error));
    const auto endpoint = link->endpoints[link->next_endpoint++];
    std::error_code ignored;
    link->socket.close(ignored);
    link->socket.async_connect(
        asio::generic::stream_protocol::endpoint(endpoint),
        [self, link, on_connected, next = weak_next.lock()](std::error_code ec) {
          if (link != self->link_) return;
          if (ec) {
            link->last_error = ec.message();
            return (*next)();
          }
          on_connected();
        });
  };
  link->resolver.async_resolve(
      host_, port_,
      [self, link, try_next](std::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (link != self->link_) return;
        if (ec)
          return self->link_ended(
              make_error_code(errc::connect_failed),
              "cannot resolve " + self->settings_.address + ": " + ec.message());
        for (const auto& entry : results) link->endpoints.push_back(entry.endpoint());
        (*try_next)();
      });
}

void Req0Socket::link_up() {
  auto link = link_;
  link->timer.cancel();
  up_ = true;
  if (events_.connected) events_.connected();
  if (link != link_) return;  // the callback closed it
  // What waited for a connection goes out, oldest first.
  std::vector<ExchangeId> waiting;
  for (auto& [id, exchange] : exchanges_)
    if (!exchange.written) waiting.push_back(id);
  for (auto id : waiting) write(id);
  auto self = shared_from_this();
  auto read = std::make_shared<std::function<void()>>();
  *read = [self, link, weak_read = std::weak_ptr(read)]() {
    link->socket.async_read_some(
        asio::buffer(link->buffer),
        [self, link, again = weak_read.lock()](std::error_code ec, std::size_t n) {
          if (link != self->link_) return;
          if (ec)
            return self->link_ended(make_error_code(errc::disconnected),
                                    "the connection to the broker at " + self->settings_.address +
                                        " ended (" + ec.message() + ")");
          std::string_view bytes(link->buffer, n);
          bool completed = false;
          while (link == self->link_) {
            std::error_code decode_ec;
            std::string why;
            bytes.remove_prefix(link->decoder.feed(bytes, decode_ec, &why));
            if (decode_ec)  // the portable condition as the reason; the words say which
              return self->link_ended(
                  make_error_code(decode_ec == errc::frame_too_large ? errc::frame_too_large
                                                                     : errc::protocol_error),
                  "the broker at " + self->settings_.address + " sent " + why);
            if (!link->decoder.ready()) break;
            completed = true;
            self->on_message(link->decoder.take());
          }
          if (link != self->link_) return;
          self->frame_clock(*link, completed);
          (*again)();
        });
  };
  // The function keeps itself alive through each pending read's handler.
  auto start = read;
  (*start)();
}

// A message that has begun must end within frame_timeout: a peer dripping one byte at a time
// does not hold the connection (and the exchanges on it) for ever.
void Req0Socket::frame_clock(Link& link, bool completed) {
  if (!link.decoder.mid_message()) {
    if (link.frame_timer_armed) link.frame_timer.cancel();
    link.frame_timer_armed = false;
    return;
  }
  if (link.frame_timer_armed && !completed) return;  // the same message is still coming
  link.frame_timer_armed = true;
  link.frame_timer.expires_after(settings_.frame_timeout);
  link.frame_timer.async_wait([self = shared_from_this(), current = link_](std::error_code ec) {
    if (ec || current != self->link_ || !current->frame_timer_armed) return;
    const auto limit = std::to_string(self->settings_.frame_timeout.count()) + "ms";
    self->link_ended(make_error_code(errc::limit_exceeded),
                     "a message from the broker at " + self->settings_.address +
                         " was still incomplete " + limit +
                         " after its first byte: exceeds frame_timeout=" + limit);
  });
}

void Req0Socket::link_ended(std::error_code why, std::string detail) {
  if (!link_) return;
  const bool was_up = up_;
  auto link = std::move(link_);
  link_.reset();
  up_ = false;
  std::error_code ignored;
  link->timer.cancel();
  link->frame_timer.cancel();
  link->write_timer.cancel();
  link->resolver.cancel();
  link->socket.close(ignored);
  writes_.clear();
  writing_ = false;
  // Written, unanswered: sent again on the next connection, or failed when it must not be.
  std::vector<ExchangeId> failed;
  for (auto& [id, exchange] : exchanges_) {
    if (!exchange.written) continue;
    exchange.written = false;
    exchange.resend_at = TimePoint::max();
    if (exchange.resend.count() == 0) failed.push_back(id);
  }
  for (auto id : failed)
    finish(id, make_error_code(errc::disconnected), {},
           "the connection to the broker dropped before the reply came (" + detail + ")");
  if (!closed_ && events_.ended) events_.ended(why, detail, was_up);
}

void Req0Socket::close() {
  if (closed_) return;
  closed_ = true;
  link_ended(make_error_code(errc::closed), "closed");
  std::vector<ExchangeId> ids;
  for (auto& [id, exchange] : exchanges_) ids.push_back(id);
  for (auto id : ids) finish(id, make_error_code(errc::closed), {}, "client closed");
  deadline_timer_.cancel();
  deadline_armed_for_ = TimePoint::max();
}

// ---- exchanges ----

std::uint32_t Req0Socket::next_request_id() {
  for (;;) {
    const std::uint32_t id = sp::request_id(id_counter_++);
    if (!by_request_id_.count(id)) return id;
  }
}

Req0Socket::ExchangeId Req0Socket::exchange(std::string request, std::chrono::milliseconds resend,
                                            std::chrono::milliseconds give_up, Sent sent,
                                            Replied replied) {
  const ExchangeId id = ++next_exchange_;
  if (closed_) {
    asio::post(strand_, [replied = std::move(replied)] {
      replied(make_error_code(errc::closed), {}, "client closed");
    });
    return id;
  }
  Exchange& exchange = exchanges_[id];
  exchange.request_id = next_request_id();
  std::string body = sp::encode_request_id(exchange.request_id);
  body.reserve(body.size() + request.size());
  body.append(request);
  exchange.frame_body = std::make_shared<const std::string>(std::move(body));
  exchange.resend = resend;
  exchange.sent = std::move(sent);
  exchange.replied = std::move(replied);
  by_request_id_[exchange.request_id] = id;
  if (give_up.count() > 0) {
    exchange.give_up = give_up;
    exchange.give_up_at = std::chrono::steady_clock::now() + give_up;
    watch_deadline(exchange.give_up_at);
  }
  if (up_) write(id);
  return id;
}

void Req0Socket::cancel(ExchangeId id, std::error_code why, std::string detail) {
  auto it = exchanges_.find(id);
  if (it == exchanges_.end()) return;
  // Ended now (a reply that comes is dropped), reported from the strand's queue: the caller may
  // be walking its own lists.
  Replied replied = std::move(it->second.replied);
  it->second.replied = nullptr;
  finish(id, {}, {}, {});
  asio::post(strand_, [replied = std::move(replied), why, detail = std::move(detail)]() mutable {
    if (replied) replied(why, {}, std::move(detail));
  });
}

void Req0Socket::write(ExchangeId id) {
  auto it = exchanges_.find(id);
  if (it == exchanges_.end() || !up_) return;
  Exchange& exchange = it->second;
  exchange.written = true;
  writes_.push_back(
      Write{sp::frame_prefix(carrier_, exchange.frame_body->size()), exchange.frame_body, id});
  if (exchange.resend.count() > 0) {
    exchange.resend_at = std::chrono::steady_clock::now() + exchange.resend;
    watch_deadline(exchange.resend_at);
  }
  write_next();
}

void Req0Socket::watch_deadline(TimePoint due) {
  if (closed_ || due >= deadline_armed_for_) return;
  deadline_armed_for_ = due;
  deadline_timer_.expires_at(due);  // a wait armed for later ends with operation_aborted
  deadline_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->on_deadline();
  });
}

void Req0Socket::on_deadline() {
  deadline_armed_for_ = TimePoint::max();
  const TimePoint now = std::chrono::steady_clock::now();
  std::vector<ExchangeId> expired, unanswered;
  for (const auto& [id, exchange] : exchanges_) {
    if (exchange.give_up_at <= now) {
      expired.push_back(id);
    } else if (exchange.written && exchange.resend_at <= now) {
      unanswered.push_back(id);
    }
  }
  // Each by its id again: finishing one runs its owner's code, which may end or add others.
  for (auto id : expired) {
    auto it = exchanges_.find(id);
    if (it == exchanges_.end()) continue;
    const auto limit = it->second.give_up;
    finish(id, make_error_code(errc::timeout), {},
           "no reply within " + std::to_string(limit.count()) + "ms");
  }
  for (auto id : unanswered) {
    auto it = exchanges_.find(id);
    if (it != exchanges_.end() && it->second.written)
      write(id);  // unanswered for its resend time: again, on this connection
  }
  TimePoint next = TimePoint::max();
  for (const auto& [id, exchange] : exchanges_)
    next = std::min({next, exchange.give_up_at, exchange.resend_at});
  if (next != TimePoint::max()) watch_deadline(next);
}

void Req0Socket::write_next() {
  if (writing_ || writes_.empty() || !link_) return;
  writing_ = true;
  auto link = link_;
  if (settings_.write_timeout.count() > 0) {
    link->write_started = std::chrono::steady_clock::now();
    if (!link->write_timer_armed) watch_write(*link);
  }
  const Write& next = writes_.front();
  const std::array<asio::const_buffer, 2> buffers{
      asio::buffer(next.head), next.body ? asio::buffer(*next.body) : asio::const_buffer()};
  asio::async_write(
      link->socket, buffers, [self = shared_from_this(), link](std::error_code ec, std::size_t) {
        if (link != self->link_) return;
        self->writing_ = false;
        if (ec)
          return self->link_ended(make_error_code(errc::disconnected),
                                  "writing to the broker at " + self->settings_.address +
                                      " failed (" + ec.message() + ")");
        const ExchangeId id = self->writes_.front().exchange;
        self->writes_.pop_front();
        if (id != 0) {
          auto it = self->exchanges_.find(id);
          if (it != self->exchanges_.end() && !it->second.ever_written) {
            it->second.ever_written = true;
            if (it->second.sent) {
              auto sent = it->second.sent;  // may end the exchange
              sent();
            }
            if (link != self->link_) return;
          }
        }
        self->write_next();
      });
}

void Req0Socket::watch_write(Link& link) {
  link.write_timer_armed = true;
  link.write_timer.expires_at(link.write_started + settings_.write_timeout);
  link.write_timer.async_wait([self = shared_from_this(), current = link_](std::error_code ec) {
    current->write_timer_armed = false;
    if (ec || current != self->link_ || !self->writing_) return;
    if (std::chrono::steady_clock::now() - current->write_started < self->settings_.write_timeout)
      return self->watch_write(*current);  // a later write, still within its time
    self->link_ended(make_error_code(errc::timeout),
                     "writing to the broker at " + self->settings_.address +
                         " made no progress for " +
                         std::to_string(self->settings_.write_timeout.count()) + "ms");
  });
}

void Req0Socket::on_message(std::string message) {
  std::string_view rest;
  const auto request_id = sp::split_reply(message, rest);
  if (events_.bytes_in) events_.bytes_in(rest.size());
  if (!request_id)
    return link_ended(make_error_code(errc::protocol_error),
                      "the broker at " + settings_.address +
                          " sent a reply without a request ID (" + std::to_string(message.size()) +
                          " bytes)");
  auto found = by_request_id_.find(*request_id);
  if (found == by_request_id_.end()) return;  // an exchange that ended: dropped, as req0 does
  auto it = exchanges_.find(found->second);
  if (it == exchanges_.end() || !it->second.written) return;  // not sent on this connection
  message.erase(0, message.size() - rest.size());  // the ID dropped in place: no new string
  finish(found->second, {}, std::move(message), {});
}

void Req0Socket::finish(ExchangeId id, std::error_code ec, std::string reply, std::string detail) {
  auto it = exchanges_.find(id);
  if (it == exchanges_.end()) return;
  Replied replied = std::move(it->second.replied);
  by_request_id_.erase(it->second.request_id);
  exchanges_.erase(it);
  if (replied) replied(ec, std::move(reply), std::move(detail));
}

}  // namespace polybus::memodb::detail
