// SPDX-License-Identifier: Apache-2.0
#include "http_link.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/http.hpp"

namespace polybus::quickio::detail {

struct HttpLink::Channel {
  std::shared_ptr<Transport> transport;
  HostPort target;
  std::weak_ptr<Request> request;  // expired or null while idle
  bool busy = false;
  bool connected = false;
  bool reused = false;  // an earlier request's answer came on it
  bool dropped = false;
};

struct HttpLink::Request {
  Request(const Strand& strand, std::size_t max_size)
      : reader(max_size, "max_frame_size"), timer(strand) {}
  std::uint64_t id = 0;
  bool handshake = false;
  std::string body;                          // the events it carries
  std::shared_ptr<const std::string> bytes;  // the request; kept, to go again after the race
  bool written = false;
  // The link closed before this request carrying events was written: its timer's handler owns
  // it until then, as a stream's close_after_flush lets queued bytes out.
  bool lingering = false;
  bool answered = false;  // a byte of the answer arrived
  bool resent = false;    // it went again after a kept-alive connection ended under it
  // The sends it carries: told when it is written, or that it never will be (at destruction).
  std::vector<WrittenFn> written_fns;
  ~Request() {
    for (auto& fn : written_fns)
      if (fn) fn(make_error_code(polybus::errc::disconnected));
  }
  std::shared_ptr<Channel> channel;  // the connection carrying it
  http::ResponseReader reader;
  asio::steady_timer timer;

  // Onto its connection, which is up.
  void write() {
    written = true;
    channel->transport->write(bytes);
    auto fns = std::move(written_fns);
    written_fns.clear();
    for (auto& fn : fns)
      if (fn) fn({});
    if (lingering) {
      channel->transport->close_after_flush();
      timer.cancel();
    }
  }
};

HttpLink::HttpLink(const Strand& strand, TransportSettings transport, HostPort target,
                   HttpLinkSettings settings, LinkHandler& handler, const AdapterContext* stats)
    : strand_(strand),
      transport_settings_(std::move(transport)),
      target_(std::move(target)),
      settings_(std::move(settings)),
      handler_(handler),
      random_(std::random_device{}()),
      post_timer_(strand) {
  if (stats) stats_.emplace(*stats);
}

HttpLink::~HttpLink() {
  end_all();
  for (auto& fn : outgoing_written_)
    if (fn) fn(make_error_code(polybus::errc::disconnected));
}

void HttpLink::start() {
  sid_ = new_session_id(random_);
  issue(true, make_event("/qio/hostname", 1, "null"));
}

void HttpLink::send(std::string_view event, WrittenFn written) {
  if (ended_ || !open_) {
    if (written) written(make_error_code(polybus::errc::disconnected));
    return;
  }
  if (!outgoing_.empty()) outgoing_.push_back('\n');
  outgoing_.append(event);
  outgoing_written_.push_back(std::move(written));
  if (requests_.size() < 2) schedule_post();
}

std::size_t HttpLink::unsent_bytes() const {
  std::size_t n = outgoing_.size();
  for (const auto& entry : requests_)
    if (!entry.second->written) n += entry.second->body.size();
  return n;
}

void HttpLink::close() {
  if (ended_) return;
  ended_ = true;
  // The session counted these events as sent: they still go out, in the request not yet
  // written if there is one (keeping their order), else in one last POST without the pause
  // (no poll follows it).
  if (open_ && !outgoing_.empty()) {
    std::shared_ptr<Request> unwritten;
    for (auto& entry : requests_)
      if (!entry.second->written && !entry.second->handshake) unwritten = entry.second;
    std::vector<WrittenFn> written(std::make_move_iterator(outgoing_written_.begin()),
                                   std::make_move_iterator(outgoing_written_.end()));
    outgoing_written_.clear();
    if (unwritten) {
      if (!unwritten->body.empty()) unwritten->body.push_back('\n');
      unwritten->body.append(outgoing_);
      unwritten->bytes = std::make_shared<const std::string>(
          make_poll_request(target_.to_string(), settings_.path, sid_, false, unwritten->body));
      for (auto& fn : written) unwritten->written_fns.push_back(std::move(fn));
    } else {
      issue(false, std::move(outgoing_), std::move(written));
    }
    outgoing_.clear();
  }
  post_timer_.cancel();
  for (auto& entry : requests_) {
    auto& request = entry.second;
    auto& transport = request->channel->transport;
    if (request->body.empty()) {
      request->timer.cancel();
      transport->close();
    } else if (request->written) {
      request->timer.cancel();
      transport->close_after_flush();  // the pending write holds the transport
    } else {
      request->lingering = true;
      request->timer.expires_after(settings_.request_timeout);  // its old wait ends aborted
      request->timer.async_wait([request](std::error_code ec) {
        if (!ec) request->channel->transport->close();  // else written or refused: released here
      });
    }
  }
  requests_.clear();
  for (auto& channel : channels_)
    if (!channel->busy) channel->transport->close();
  channels_.clear();
}

void HttpLink::fail(std::error_code ec, const std::string& detail) {
  if (ended_) return;
  ended_ = true;
  keep_unsent();
  end_all();
  handler_.on_link_closed(this, ec, detail, false);
}

// The events of the requests no socket took (in request order), then those waiting for the next
// POST: their order of sending. Events are '\n'-separated and never contain one.
void HttpLink::keep_unsent() {
  const auto give_back = [this](const std::string& body, auto& fns) {
    std::size_t start = 0;
    for (auto& fn : fns) {
      if (start > body.size()) break;
      const std::size_t end = std::min(body.find('\n', start), body.size());
      unsent_.push_back({body.substr(start, end - start), std::move(fn)});
      fn = {};
      start = end + 1;
    }
  };
  for (auto& [id, request] : requests_)
    if (!request->handshake && !request->written && !request->body.empty())
      give_back(request->body, request->written_fns);
  give_back(outgoing_, outgoing_written_);
  outgoing_.clear();
  outgoing_written_.clear();
}

void HttpLink::end_all() {
  post_timer_.cancel();
  for (auto& [id, request] : requests_) request->timer.cancel();
  requests_.clear();
  for (auto& channel : channels_) channel->transport->close();
  channels_.clear();
}

void HttpLink::issue(bool handshake, std::string body, std::vector<WrittenFn> written) {
  auto request = std::make_shared<Request>(strand_, settings_.max_response_size);
  request->id = next_request_++;
  request->handshake = handshake;
  request->bytes = std::make_shared<const std::string>(
      make_poll_request(target_.to_string(), settings_.path, sid_, handshake, body));
  if (!handshake) request->body = std::move(body);
  request->written_fns = std::move(written);
  requests_.emplace(request->id, request);

  std::weak_ptr<HttpLink> weak = shared_from_this();
  std::weak_ptr<Request> weak_request = request;
  request->timer.expires_after(settings_.request_timeout);
  request->timer.async_wait([weak, weak_request](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !weak_request.lock()) return;
    self->fail(make_error_code(polybus::errc::timeout),
               self->endpoint() + ": HTTP request unanswered within http_request_timeout");
  });
  attach(request);
}

bool HttpLink::same_target(const Channel& channel) const {
  return channel.target.host == target_.host && channel.target.port == target_.port;
}

void HttpLink::attach(const std::shared_ptr<Request>& request) {
  for (auto& channel : channels_) {
    if (channel->busy || !channel->connected || !same_target(*channel)) continue;
    channel->busy = true;
    channel->request = request;
    request->channel = channel;
    request->write();
    return;
  }
  open_channel(request);
}

void HttpLink::open_channel(const std::shared_ptr<Request>& request) {
  // An idle connection to a host no longer used (before the handshake named the server) goes.
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (!(*it)->busy && !same_target(**it)) {
      (*it)->dropped = true;
      (*it)->transport->close();
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
  auto channel = std::make_shared<Channel>();
  channel->target = target_;
  channel->busy = true;
  channel->request = request;
  request->channel = channel;
  channels_.push_back(channel);

  std::weak_ptr<HttpLink> weak = shared_from_this();
  std::weak_ptr<Channel> weak_channel = channel;
  Transport::Callbacks callbacks;
  callbacks.on_connected = [weak_channel] {
    auto c = weak_channel.lock();
    if (!c) return;
    c->connected = true;
    if (auto r = c->busy ? c->request.lock() : nullptr) r->write();
  };
  callbacks.on_data = [weak, weak_channel](const std::shared_ptr<ReadChunk>&, const char* data,
                                           std::size_t n) {
    auto self = weak.lock();
    auto c = weak_channel.lock();
    if (!self || !c || self->ended_ || c->dropped) return;
    auto r = c->busy ? c->request.lock() : nullptr;
    if (!r)
      return self->fail(make_error_code(polybus::errc::protocol_error),
                        self->endpoint() + ": HTTP bytes on a connection with no request out");
    r->answered = true;
    if (auto ec = r->reader.feed(std::string_view(data, n)))
      return self->fail(ec, self->endpoint() + ": " + r->reader.why());
    // Liveness counts whole responses: one that drips in is no sign of life.
    if (r->reader.complete()) {
      self->handler_.on_link_activity(self.get());
      return self->on_response(r);
    }
    // A response begun must complete within frame_timeout, however slowly it drips.
    c->transport->frame_state(true, false);
  };
  callbacks.on_closed = [weak, weak_channel](std::error_code ec, const std::string& detail) {
    auto c = weak_channel.lock();
    if (!c) return;
    auto r = c->busy ? c->request.lock() : nullptr;
    if (r && r->lingering) {
      r->timer.cancel();  // the link is closed: nobody to tell
      return;
    }
    auto self = weak.lock();
    if (!self || self->ended_ || c->dropped) return;
    self->on_channel_closed(c, ec, detail);
  };
  channel->transport = Transport::create(strand_, transport_settings_, std::move(callbacks),
                                         stats_ ? &*stats_ : nullptr);
  channel->transport->connect(target_);
}

void HttpLink::drop_channel(const std::shared_ptr<Channel>& channel) {
  channel->dropped = true;
  channels_.erase(std::remove(channels_.begin(), channels_.end(), channel), channels_.end());
}

void HttpLink::on_channel_closed(const std::shared_ptr<Channel>& channel, std::error_code ec,
                                 const std::string& detail) {
  drop_channel(channel);
  auto r = channel->busy ? channel->request.lock() : nullptr;
  if (!r) return;  // an idle connection the server ended: the next request opens another
  if (channel->reused && r->written && !r->answered && !r->resent) {
    // The server ended the kept-alive connection as this request went out, so it never read
    // it: the request goes again on a new connection (its reader has seen nothing yet).
    r->resent = true;
    return open_channel(r);
  }
  if (!r->reader.finish()) return on_response(r);
  fail(ec ? ec : make_error_code(polybus::errc::disconnected),
       detail.empty() ? endpoint() + ": " + r->reader.why() : detail);
}

void HttpLink::on_response(const std::shared_ptr<Request>& request) {
  request->timer.cancel();
  if (auto channel = std::exchange(request->channel, nullptr)) {
    channel->busy = false;
    channel->request.reset();
    channel->transport->frame_state(false, true);
    if (!channel->dropped && request->reader.reusable() && request->reader.status() == 200) {
      channel->reused = true;
    } else {
      channel->transport->close();
      drop_channel(channel);
    }
  }
  requests_.erase(request->id);
  int status = request->reader.status();
  if (status != 200)
    return fail(make_error_code(client_errc::http_status),
                endpoint() + ": HTTP " + std::to_string(status) + " to a long-polling request");
  auto body = std::make_shared<std::string>(std::move(request->reader.body()));
  std::shared_ptr<const void> owner = body;
  std::string_view rest = *body;
  auto keep = shared_from_this();  // a handler may drop the link while events are handed on
  if (request->handshake) {
    // The answer to /qio/hostname:1 comes first; the host it names is used from now on.
    std::string_view first = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), first.size() + 1));
    Event event;
    CallbackBody answer;
    std::string host;
    HostAnswer parsed;
    if (parse_event(first, event) || callback_path_id(event.path) != 1u ||
        parse_callback_body(event.json, answer) || answer.code != 200)
      return fail(make_error_code(client_errc::handshake_refused),
                  endpoint() + ": no /qio/hostname answer to the HTTP handshake");
    if (json_unquote(answer.data_json, host) && parse_host_answer(host, parsed)) {
      target_.host = parsed.host;
      if (parsed.port != 0) target_.port = parsed.port;
    }
    open_ = true;
    handler_.on_link_open(this);
    if (ended_) return;
  }
  for_each_line(rest, [&](std::string_view line) {
    if (!ended_ && !line.empty()) handler_.on_link_event(this, line, owner);
  });
  if (!ended_) after_response();
}

void HttpLink::after_response() {
  // The poll that ended is replaced, unless a newer request (now the held one) is out.
  if (requests_.empty() || (!outgoing_.empty() && requests_.size() < 2)) schedule_post();
}

// Whole events, up to kMaxPostBody bytes (one larger event goes alone): servers bound request
// bodies (the in-process one, like most HTTP servers, at 16 MiB). The rest waits for the next POST.
std::string HttpLink::take_post_body(std::vector<WrittenFn>& written) {
  std::size_t cut = std::string::npos;
  if (outgoing_.size() > kMaxPostBody) {
    cut = outgoing_.rfind('\n', kMaxPostBody);
    if (cut == std::string::npos) cut = outgoing_.find('\n');
  }
  std::string body;
  if (cut == std::string::npos) {
    body = std::exchange(outgoing_, {});
  } else {
    body = outgoing_.substr(0, cut);
    outgoing_.erase(0, cut + 1);
  }
  // Events are '\n'-separated and never contain one (JSON escapes it).
  const std::size_t events = body.empty() ? 0 : std::count(body.begin(), body.end(), '\n') + 1;
  for (std::size_t i = 0; i < events && !outgoing_written_.empty(); ++i) {
    written.push_back(std::move(outgoing_written_.front()));
    outgoing_written_.pop_front();
  }
  return body;
}

void HttpLink::schedule_post() {
  if (post_scheduled_ || ended_) return;
  post_scheduled_ = true;
  auto max = settings_.poll_delay_max.count();
  auto delay = std::chrono::milliseconds(
      max <= 0 ? 0 : std::uniform_int_distribution<std::int64_t>(0, max)(random_));
  post_timer_.expires_after(delay);
  post_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->ended_) return;
    self->post_scheduled_ = false;
    if (self->requests_.size() >= 2) return;  // sent when one of them completes
    // One request carrying events at a time: the server reads a request's events as it arrives,
    // and two requests on two connections may arrive in either order (a new TLS connection
    // behind a kept-alive one), which reorders what was published. While one is unanswered, a
    // plain poll goes instead: the server answers the request it holds when a new one comes,
    // and the events follow in the next request.
    const bool events_unanswered = std::any_of(
        self->requests_.begin(), self->requests_.end(),
        [](const auto& entry) { return !entry.second->handshake && !entry.second->body.empty(); });
    if (events_unanswered) return self->issue(false, {}, {});
    std::vector<WrittenFn> written;
    std::string body = self->take_post_body(written);
    self->issue(false, std::move(body), std::move(written));
  });
}

}  // namespace polybus::quickio::detail
