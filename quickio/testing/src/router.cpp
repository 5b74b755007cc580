// SPDX-License-Identifier: Apache-2.0
// Event routing: the built-in events, pub/sub by exact path, requests relayed to one subscriber
// as server callbacks, and what happens to them when clients go away.
#include <rapidjson/document.h>
#include <asio/post.hpp>

#include "http_session.hpp"
#include "journal_and_faults.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"
#include "server_impl.hpp"

namespace polybus::quickio::testing {
namespace {

constexpr std::string_view kQioPrefix = "/qio/";

}  // namespace

std::optional<std::string> subscription_path(std::string_view json) {
  std::string path;
  if (json_unquote(json, path)) return path;
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsArray() || doc.Empty() || !doc[0].IsString())
    return std::nullopt;
  return std::string(doc[0].GetString(), doc[0].GetStringLength());
}

Peer::Peer(ServerImpl& server_impl, Kind peer_kind)
    : server(server_impl), id(server_impl.next_peer_id_++), kind(peer_kind) {}

void ServerImpl::add_peer(Peer& peer) {
  peers_[peer.id] = &peer;
  peer.slots.resize(options_.max_pending_server_callbacks);
  peer.last_sent = peer.last_received = Clock::now();
}

void ServerImpl::peer_gone(Peer& peer) {
  if (peers_.erase(peer.id) == 0) return;
  for (const auto& path : peer.subscriptions) unsubscribe(peer, path);
  peer.subscriptions.clear();
  for (auto& slot : peer.slots) {
    if (!slot.busy) continue;
    slot.busy = false;
    relay_answer(slot.relay, 500, "null", "disconnected");
  }
  for (auto& waiting : peer.waiting) relay_answer(waiting.relay, 500, "null", "disconnected");
  peer.waiting.clear();
}

void ServerImpl::unsubscribe(Peer& peer, const std::string& path) {
  auto it = paths_.find(path);
  if (it == paths_.end()) return;
  auto& peers = it->second.peers;
  peers.erase(std::remove(peers.begin(), peers.end(), &peer), peers.end());
  if (peers.empty()) paths_.erase(it);
}

bool ServerImpl::handle_event(Peer& peer, std::string_view text) {
  Event event;
  if (parse_event(text, event)) return false;
  peer.last_received = Clock::now();
  if (peer.fault_ending) return true;  // a fault ends it: nothing more is carried out
  if (journal_.enabled() || !faults_.empty()) {
    route_with_faults(peer, event);
  } else {
    route(peer, event);
  }
  return true;
}

void ServerImpl::route(Peer& peer, const Event& event) {
  if (event.path.substr(0, kQioPrefix.size()) == kQioPrefix) {
    handle_builtin(peer, event.path, event.callback_id, event.json);
  } else if (event.callback_id == 0) {
    const std::string path = clean_path(event.path);
    ++counters(path).published;
    broadcast(path, event.json);
  } else {
    request(peer, clean_path(event.path), event.callback_id, event.json);
  }
}

void ServerImpl::route_with_faults(Peer& peer, const Event& event) {
  using Action = polybus::testing::FaultRule::Action;
  const EventUnit unit = event_unit(event);
  if (journal_.enabled()) journal_received(journal_, peer, event, unit);
  if (faults_.empty()) return route(peer, event);
  const auto fault = faults_.fire({unit.kind, unit.topic, {}, peer.id});
  if (!fault) return route(peer, event);
  switch (fault->action) {
    case Action::error: {
      // An event without a callback cannot be answered: the connection ends instead.
      if (event.callback_id == 0) return end_later(peer, false);
      // "503 overloaded": code 503, err_msg "overloaded"; no code: a 500, the server's failure.
      const auto answered = polybus::testing::fault_status(fault->error);
      answer(peer, event.callback_id, answered.status, "null", answered.text);
      if (fault->fatal) end_later(peer, false);
      return;
    }
    case Action::swallow:
      return;
    case Action::close:
      return end_later(peer, false);
    case Action::reset:
      return end_later(peer, true);
    case Action::delay:
      peer.hold_output(fault->delay);
      return route(peer, event);
    case Action::hold:
      peer.hold_output(std::chrono::hours(24 * 365));  // until the rule is removed
      faults_.when_removed(fault->id, peer.id, [this, id = peer.id] {
        asio::post(io_.context(), [this, id] {
          if (auto it = peers_.find(id); it != peers_.end())
            it->second->hold_output(std::chrono::milliseconds(0));
        });
      });
      return route(peer, event);
    case Action::duplicate:
      route(peer, event);
      return route(peer, event);
  }
}

void ServerImpl::end_later(Peer& peer, bool reset) {
  peer.fault_ending = true;
  asio::post(io_.context(), [this, id = peer.id, reset] {
    auto it = peers_.find(id);
    if (it == peers_.end()) return;  // gone meanwhile
    if (reset) {
      it->second->reset_transport();
    } else {
      it->second->close_transport();
    }
  });
}

void ServerImpl::handle_builtin(Peer& peer, std::string_view path, std::uint64_t callback_id,
                                std::string_view json) {
  if (path == "/qio/on") return subscribe(peer, callback_id, json);
  if (path == "/qio/off") {
    if (auto target = subscription_path(json)) {
      std::string cleaned = clean_path(*target);
      if (peer.subscriptions.erase(cleaned) > 0) unsubscribe(peer, cleaned);
    }
    return answer(peer, callback_id, 200, "null");  // even when not subscribed, as the real server
  }
  if (path == "/qio/ping" || path == "/qio/heartbeat")
    return answer(peer, callback_id, 200, "null");
  if (path == "/qio/hostname")
    return answer(peer, callback_id, 200, text::json_quote(public_address()));
  if (auto id = callback_path_id(path)) return server_callback_answered(peer, *id, json);
  answer(peer, callback_id, 404, "null", "unknown event");
}

void ServerImpl::subscribe(Peer& peer, std::uint64_t callback_id, std::string_view json) {
  auto target = subscription_path(json);
  if (!target || !is_valid_path(*target)) return answer(peer, callback_id, 400, "null", "bad path");
  std::string path = clean_path(*target);
  if (path.substr(0, kQioPrefix.size()) == kQioPrefix)
    return answer(peer, callback_id, 401, "null", "not subscribable");
  if (peer.subscriptions.count(path) == 0) {
    if (peer.subscriptions.size() >= options_.max_subscriptions)
      return answer(peer, callback_id, 420, "null", "too many subscriptions");
    peer.subscriptions.insert(path);
    paths_[path].peers.push_back(&peer);
  }
  answer(peer, callback_id, 200, "null");
}

void ServerImpl::send(Peer& peer, std::string_view path, std::uint64_t callback_id,
                      std::string_view json) {
  if (silent_) return;
  if (journal_.enabled()) journal_sent(journal_, peer, path, callback_id, json);
  peer.write_event(make_event(path, callback_id, json));
  peer.last_sent = Clock::now();
}

void ServerImpl::answer(Peer& peer, std::uint64_t callback_id, int code, std::string_view data_json,
                        std::string_view err_msg) {
  if (callback_id == 0) return;
  send(peer, callback_path(callback_id), 0, make_callback_body(code, data_json, err_msg));
}

void ServerImpl::broadcast(std::string_view path, std::string_view json) {
  if (silent_) return;
  auto it = paths_.find(std::string(path));
  if (it == paths_.end()) return;
  std::string text = make_event(path, 0, json);
  auto now = Clock::now();
  for (Peer* peer : it->second.peers) {
    if (journal_.enabled()) journal_sent(journal_, *peer, path, 0, json);
    peer->write_event(text);
    peer->last_sent = now;
  }
  counters(path).delivered += it->second.peers.size();
}

void ServerImpl::request(Peer& peer, std::string_view path, std::uint64_t callback_id,
                         std::string_view json) {
  auto it = paths_.find(std::string(path));
  if (it == paths_.end() || it->second.peers.empty())
    return answer(peer, callback_id, 404, "null", "no subscriber");
  ++counters(path).published;
  auto& subscribers = it->second;
  Peer& target = *subscribers.peers[subscribers.next++ % subscribers.peers.size()];
  deliver_request(target,
                  Peer::Waiting{std::string(path), std::string(json), {peer.id, callback_id}});
}

void ServerImpl::deliver_request(Peer& target, Peer::Waiting request) {
  for (std::size_t index = 0; index < target.slots.size(); ++index) {
    Peer::Slot& slot = target.slots[index];
    if (slot.busy) continue;
    slot.busy = true;
    if (++slot.seq == 0) slot.seq = 1;  // id 0 would mean "no callback"
    slot.relay = request.relay;
    slot.path = request.path;
    slot.expires = callback_now() + options_.callback_expiry;
    if (options_.clock) arm_callback_timer();
    ++counters(request.path).delivered;
    return send(target, request.path, (std::uint64_t{index} << 16) | slot.seq, request.json);
  }
  if (target.waiting.size() >= kMaxWaitingRequests)
    return relay_answer(request.relay, 500, "null", "too many pending callbacks");
  target.waiting.push_back(std::move(request));
}

void ServerImpl::server_callback_answered(Peer& peer, std::uint64_t id, std::string_view json) {
  std::uint64_t index = id >> 16;
  auto seq = static_cast<std::uint16_t>(id & 0xffff);
  if (peer.challenge_id != 0 && id == peer.challenge_id) {
    peer.challenge_id = 0;
    return;
  }
  if (index >= peer.slots.size()) return;
  Peer::Slot& slot = peer.slots[index];
  if (!slot.busy || slot.seq != seq) return;  // expired or never issued
  slot.busy = false;
  ++counters(slot.path).answered;
  CallbackBody body;
  if (parse_callback_body(json, body)) {
    relay_answer(slot.relay, 500, "null", "malformed callback answer");
  } else {
    relay_answer(slot.relay, body.code, body.data_json, body.err_msg);
  }
  pump_waiting(peer);
}

void ServerImpl::relay_answer(const Peer::Relay& relay, int code, std::string_view data_json,
                              std::string_view err_msg) {
  auto it = peers_.find(relay.requester);
  if (it != peers_.end()) answer(*it->second, relay.requester_callback, code, data_json, err_msg);
}

void ServerImpl::pump_waiting(Peer& peer) {
  auto free_slot = [&] {
    return std::any_of(peer.slots.begin(), peer.slots.end(),
                       [](const Peer::Slot& s) { return !s.busy; });
  };
  while (!peer.waiting.empty() && free_slot()) {
    Peer::Waiting next = std::move(peer.waiting.front());
    peer.waiting.pop_front();
    deliver_request(peer, std::move(next));
  }
}

void ServerImpl::expire_callbacks(Peer& peer) {
  const Clock::time_point now = callback_now();
  for (auto& slot : peer.slots) {
    if (!slot.busy || slot.expires > now) continue;
    slot.busy = false;
    relay_answer(slot.relay, 500, "null", "callback expired");
  }
  pump_waiting(peer);
}

void ServerImpl::arm_callback_timer() {
  if (!callback_timer_)
    callback_timer_ = std::make_unique<ClockTimer>(io_.context(), options_.clock);
  std::optional<Clock::time_point> earliest;
  for (const auto& entry : peers_)
    for (const auto& slot : entry.second->slots)
      if (slot.busy && (!earliest || slot.expires < *earliest)) earliest = slot.expires;
  if (earliest == callback_armed_) return;  // that wait is pending already
  callback_armed_ = earliest;
  if (!earliest) {
    callback_timer_->cancel();
    return;
  }
  callback_timer_->expires_at(*earliest);
  callback_timer_->async_wait([this](std::error_code ec) {
    if (ec || stopping_) return;
    callback_armed_.reset();
    std::vector<std::uint64_t> ids;
    for (const auto& entry : peers_) ids.push_back(entry.first);
    for (auto id : ids)
      if (auto it = peers_.find(id); it != peers_.end()) expire_callbacks(*it->second);
    arm_callback_timer();
  });
}

void ServerImpl::check_peer(Peer& peer, Clock::time_point now) {
  expire_callbacks(peer);
  if (silent_) return;  // silent: nothing written, nothing closed
  if (peer.kind == Peer::Kind::http) {
    auto& session = static_cast<HttpSession&>(peer);
    if (session.has_held()) {
      if (now - session.held_since >= options_.http_poll_timeout) session.complete_held();
    } else if (now - session.last_post >= 2 * options_.http_poll_timeout) {
      end_session(session);  // abandoned
    }
    return;
  }
  if (peer.challenge_id != 0) {
    if (now >= peer.challenge_deadline) return peer.close_transport();
  } else if (now - peer.last_received >= options_.challenge_after) {
    std::uint64_t index = options_.max_pending_server_callbacks;  // the slot after the relays'
    if (++peer.challenge_seq == 0) peer.challenge_seq = 1;
    peer.challenge_id = (index << 16) | peer.challenge_seq;
    peer.challenge_deadline = now + options_.challenge_timeout;
    send(peer, "/qio/heartbeat", peer.challenge_id, "null");
  }
  if (now - peer.last_sent >= options_.heartbeat_interval) send(peer, "/qio/heartbeat", 0, "null");
}

void ServerImpl::move_all(const std::string& address) {
  std::vector<std::uint64_t> ids;
  for (const auto& entry : peers_) ids.push_back(entry.first);
  for (auto id : ids) {
    auto it = peers_.find(id);
    if (it == peers_.end()) continue;
    Peer& peer = *it->second;
    send(peer, "/qio/move", 0, text::json_quote(address));
    if (peer.kind == Peer::Kind::http) {
      static_cast<HttpSession&>(peer).end_after_delivery();  // else the move is lost
    } else {
      peer.close_transport();
    }
  }
}

std::size_t ServerImpl::count(Peer::Kind kind) const {
  std::size_t n = 0;
  for (const auto& entry : peers_) n += entry.second->kind == kind;
  return n;
}

std::size_t ServerImpl::subscribers(const std::string& path) const {
  auto it = paths_.find(path);
  return it == paths_.end() ? 0 : it->second.peers.size();
}

metrics::BrokerMetrics ServerImpl::metrics() const {
  metrics::BrokerMetrics m;
  m.scheme = "quickio";
  m.running = acceptor_.is_open();
  m.connections = peers_.size();
  m.connections_accepted = accepted_;
  m.bytes_received = bytes_received_;
  m.bytes_sent = bytes_sent_;
  // Requests relayed and not answered yet, and waiting for a free callback slot, per path.
  std::map<std::string_view, std::pair<std::uint64_t, std::uint64_t>> open;  // in flight, queued
  for (const auto& [id, peer] : peers_) {
    for (const auto& slot : peer->slots)
      if (slot.busy) ++open[slot.path].first;
    for (const auto& waiting : peer->waiting) ++open[waiting.path].second;
  }
  std::map<std::string_view, metrics::BrokerQueueMetrics> queues;
  for (const auto& [path, counted] : path_counters_.all()) {  // sorted by path
    m.topics.push_back({path, counted.published, 0});
    auto& q = queues[path];
    q.delivered = counted.delivered;
    q.acked = counted.answered;
  }
  for (const auto& [path, subscribers] : paths_) queues[path].consumers = subscribers.peers.size();
  for (const auto& [path, counts] : open) {
    queues[path].in_flight = counts.first;
    queues[path].queued = counts.second;
  }
  for (auto& [path, q] : queues) {
    q.topic = std::string(path);
    m.queues.push_back(std::move(q));
  }
  return m;
}

std::string ServerImpl::public_address() const {
  if (!options_.public_hostname.empty()) return options_.public_hostname;
  return "127.0.0.1:" + std::to_string(port_);
}

HttpSession* ServerImpl::find_session(const std::string& sid) {
  auto it = sessions_.find(sid);
  return it == sessions_.end() ? nullptr : it->second.get();
}

HttpSession& ServerImpl::open_session(const std::string& sid) {
  auto session = std::make_unique<HttpSession>(*this, sid);
  HttpSession& ref = *session;
  sessions_[sid] = std::move(session);
  add_peer(ref);
  return ref;
}

void ServerImpl::end_session(HttpSession& session) {
  std::string sid = session.sid;
  session.complete_held();  // e.g. carries a /qio/move out
  peer_gone(session);
  sessions_.erase(sid);
}

}  // namespace polybus::quickio::testing
