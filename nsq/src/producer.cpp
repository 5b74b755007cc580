// SPDX-License-Identifier: Apache-2.0
#include "producer.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <unordered_set>

#include "polybus/adapter/budget.hpp"
#include "polybus/error.hpp"

namespace polybus::nsq {
namespace {

// Gathering single publishes into one MPUB (Producer::gathering_): within every nsqd's default
// limits (max-msg-size 1 MiB, max-body-size 5 MiB); one that nsqd refuses is split again.
constexpr std::size_t kGatherAtMost = 64 * 1024;
constexpr std::size_t kMaxGathered = 512;
constexpr std::size_t kMaxGatheredBytes = 256 * 1024;

using NodeState = detail::PublishNodeCells::State;

}  // namespace

Producer::Producer(std::shared_ptr<const AdapterContext> context, Settings settings,
                   std::vector<HostPort> nsqds, Discover discover)
    : context_(std::move(context)),
      settings_(std::move(settings)),
      discover_(std::move(discover)),
      dial_pacer_(context_->strand(), settings_.max_dials_per_second) {
  set_nodes(std::move(nsqds), false);
  if (discover_)
    rediscover_ =
        std::make_unique<Reconnector>(context_->strand(), context_->backoff(), context_->clock());
}

void Producer::set_nodes(std::vector<HostPort> nsqds, bool discovered) {
  // Linear in the answer (it may list tens of thousands): one set of the nsqd known.
  std::unordered_set<std::string> known;
  for (auto& node : nodes_) known.insert(node->target.to_string());
  if (discovered) {
    // Known nsqd that failed and hold nothing give way when the answer offers others.
    const bool offers_new = std::any_of(nsqds.begin(), nsqds.end(), [&](const HostPort& target) {
      return known.count(target.to_string()) == 0;
    });
    if (offers_new) {
      std::vector<std::shared_ptr<Node>> failed;
      for (auto& node : nodes_)
        if (node->failed && node->awaiting.empty() &&
            !(node->connection && node->connection->ready()))
          failed.push_back(node);
      for (auto& node : failed) {
        known.erase(node->target.to_string());
        retire(node);
      }
    }
  }
  // More than may be kept: a random choice, so that a list led by dead entries cannot keep a
  // publisher from the live ones for good, and publishers spread over the nsqd. The rest wait
  // in untried_, to replace those that fail.
  if (discovered && nodes_.size() + nsqds.size() > settings_.max_nsqd_connections)
    std::shuffle(nsqds.begin(), nsqds.end(), random_);
  if (discovered) untried_.clear();
  std::size_t skipped = 0;
  for (auto& target : nsqds) {
    if (!known.insert(target.to_string()).second) continue;
    if (discovered && nodes_.size() >= settings_.max_nsqd_connections) {
      ++skipped;
      untried_.push_back(std::move(target));
      continue;
    }
    nodes_.push_back(make_node(std::move(target), discovered));
  }
  if (skipped > 0)
    context_->log(LogLevel::warn,
                  limit_exceeded_text("nsqlookupd lists more nsqd than a publisher uses (a random "
                                      "choice of them is kept)",
                                      "max_nsqd_connections", settings_.max_nsqd_connections,
                                      nodes_.size() + skipped));
}

std::shared_ptr<Producer::Node> Producer::make_node(HostPort target, bool discovered) {
  auto node = std::make_shared<Node>();
  node->cells = context_->publish_node(target.to_string());
  node->target = std::move(target);
  node->discovered = discovered;
  return node;
}

void Producer::retire(const std::shared_ptr<Node>& node) {
  node->widened.release();
  if (node->reconnect) node->reconnect->cancel();
  if (node->connection) node->connection->close();
  nodes_.erase(std::remove(nodes_.begin(), nodes_.end(), node), nodes_.end());
  // Released later: a callback of its connection may be what retires it.
  asio::post(context_->strand(), [doomed = node] {});
}

Producer::Node* Producer::usable_node() {
  for (auto& node : nodes_)
    if (node->connection && node->connection->ready()) return node.get();
  return nullptr;
}

Producer::Node* Producer::node_with_room() {
  const auto strategy = settings_.publish_strategy;
  Node* best = nullptr;
  for (auto& node : nodes_) {
    if (!(node->connection && node->connection->ready() && node->connection->write_room()))
      continue;
    if (strategy == PublishStrategy::failover) return node.get();  // the first up, in order
    if (!best ||
        (strategy == PublishStrategy::least_pending &&
         (node->pending < best->pending ||
          (node->pending == best->pending && node->sent < best->sent))) ||
        (strategy == PublishStrategy::round_robin && node->sent < best->sent))
      best = node.get();
  }
  return best;
}

void Producer::node_ready(Node& node) {
  node.cells->state.store(NodeState::ready);
  // A first connection catches up with those that were up before it (the first up took what came
  // meanwhile); one that comes back is in turn with the others, not owed what it missed while
  // out: it would take every publish until it caught up.
  if (!node.ever_ready) return;
  std::uint64_t least = UINT64_MAX;
  for (auto& other : nodes_)
    if (other.get() != &node && other->connection && other->connection->ready())
      least = std::min(least, other->sent);
  if (least != UINT64_MAX) node.sent = least;
}

void Producer::settled(Node& node, const Outgoing& out, bool confirmed) {
  const std::uint64_t n = out.batch ? out.bodies.size() : 1;
  node.pending -= std::min(node.pending, n);
  node.cells->pending.store(node.pending, std::memory_order_relaxed);
  (confirmed ? node.cells->confirmed : node.cells->failed).fetch_add(n, std::memory_order_relaxed);
}

void Producer::publish(PublishWork work) {
  if (closed_) return work.done(make_error_code(polybus::errc::closed));
  if (!valid_topic_name(work.topic))
    return work.done(
        make_error_code(errc::invalid_name), {},
        "'" + work.topic.str() + "' is not a valid NSQ topic (1-64 of [.a-zA-Z0-9_-])");
  if (work.defer.count() > 3'600'000)
    return work.done(make_error_code(polybus::errc::invalid_argument), {},
                     "deferred publish over nsqd's maximum (1h by default)");
  // "MPUB <topic>\n", the body's size and count, a size before each message (PUB, DPUB: less).
  std::size_t frame = work.topic.size() + 32;
  for (const auto& payload : work.payloads) frame += payload.size() + 4;
  if (auto text = frame_over_write_room(context_->budget(), frame); !text.empty())
    return work.done(make_error_code(polybus::errc::limit_exceeded), {}, text);
  Outgoing out{std::move(work.topic), {}, {}, work.defer, std::move(work.done), {}, false};
  if (work.payloads.size() == 1) {
    out.body.assign(std::move(work.payloads.front()), payload_blocks_);
  } else {
    out.batch = true;
    out.bodies.resize(work.payloads.size());
    for (std::size_t i = 0; i < work.payloads.size(); ++i)
      out.bodies[i].assign(std::move(work.payloads[i]), payload_blocks_);
  }
  const std::size_t size = out.body.size();
  const bool gatherable = !out.batch && out.defer.count() == 0 && size > 0 && size <= kGatherAtMost;
  if (!gatherable) {
    flush_gathered();  // what came before goes first
    return route(std::move(out));
  }
  if (gathering_.gathered() &&
      (gathering_.topic != out.topic || gathering_.dones.size() >= kMaxGathered ||
       gathering_bytes_ + size > max_gathered_bytes()))
    flush_gathered();
  if (!gathering_.gathered()) {
    gathering_.topic = std::move(out.topic);
    gathering_.batch = true;
  }
  gathering_.bodies.push_back(std::move(out.body));
  gathering_.dones.push_back(std::move(out.done));
  gathering_bytes_ += size;
  if (gather_flush_posted_) return;
  gather_flush_posted_ = true;
  asio::post(context_->strand(), in_memory(gather_flush_memory_, [weak = weak_from_this()] {
               auto self = weak.lock();
               if (!self) return;
               self->gather_flush_posted_ = false;
               self->flush_gathered();
             }));
}

std::size_t Producer::max_gathered_bytes() const {
  // Within the write room (Transport::write_room) a small max_write_buffer leaves.
  return std::min(kMaxGatheredBytes, settings_.transport.max_write_buffer / 4);
}

void Producer::flush_gathered() {
  if (!gathering_.gathered()) return;
  Outgoing out = std::move(gathering_);
  gathering_ = Outgoing{};
  gathering_bytes_ = 0;
  if (closed_) return complete(out, make_error_code(polybus::errc::closed), "client closed");
  // Into vectors an answered burst left, else two allocations for it, not a doubling series.
  if (!spare_vectors_.empty()) {
    gathering_.bodies = std::move(spare_vectors_.back().bodies);
    gathering_.dones = std::move(spare_vectors_.back().dones);
    spare_vectors_.pop_back();
  }
  // Reserved for the largest burst so far: kept vectors then fit whichever burst takes them.
  largest_burst_ = std::max(largest_burst_, out.dones.size());
  gathering_.bodies.reserve(largest_burst_);
  gathering_.dones.reserve(largest_burst_);
  route(std::move(out));
}

void Producer::keep_vectors(Outgoing& answered) {
  if (answered.dones.capacity() == 0 || answered.bodies.capacity() > kMaxGathered ||
      spare_vectors_.size() >=
          std::clamp(most_awaiting_, kSpareVectorsAtLeast, kSpareVectorsAtMost))
    return;
  answered.bodies.clear();
  answered.dones.clear();
  spare_vectors_.push_back({std::move(answered.bodies), std::move(answered.dones)});
}

void Producer::route(Outgoing out) {
  // Behind what already waits (in order), and while the socket has room: a caller that publishes
  // faster than it drains waits here, not in the transport, which would end the connection.
  if (waiting_.empty())
    if (Node* node = node_with_room()) return send(*node, out);
  count_waiting(out, true);
  waiting_.push_back(std::move(out));
  connect_some();
}

void Producer::count_waiting(const Outgoing& out, bool added) {
  const std::size_t messages = out.batch ? out.bodies.size() : 1;
  waiting_messages_ = added ? waiting_messages_ + messages : waiting_messages_ - messages;
  context_->waiting_publishes(waiting_messages_);
}

void Producer::complete(Outgoing& out, std::error_code ec, const std::string& detail) {
  if (!out.gathered()) return out.done(ec, {}, detail);
  auto dones = std::move(out.dones);
  out.dones.clear();
  for (auto& done : dones) done(ec, {}, detail);
  dones.clear();
  out.dones = std::move(dones);  // emptied, its capacity kept (keep_vectors)
}

void Producer::send(Node& node, Outgoing& work) {
  if (work.gathered()) {
    // Those whose deadline passed while they waited go no further.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < work.dones.size(); ++i) {
      if (work.dones[i].done()) continue;
      if (kept != i) {  // a string moved onto itself is left empty
        work.dones[kept] = std::move(work.dones[i]);
        work.bodies[kept] = std::move(work.bodies[i]);
      }
      ++kept;
    }
    work.dones.resize(kept);
    work.bodies.resize(kept);
    if (kept == 0) return;
    if (kept == 1) {  // a PUB, as it would have gone alone
      work.body = std::move(work.bodies.front());
      work.done = std::move(work.dones.front());
      work.bodies.clear();
      work.dones.clear();
      work.batch = false;
    }
  }
  if (!work.gathered() && work.done.done()) return;  // its deadline passed while it waited
  // Awaiting its answer before it is written: a write over max_write_buffer ends the connection
  // at once, and on_closed must find it there to send it again.
  const std::uint64_t messages = work.batch ? work.bodies.size() : 1;
  node.sent += messages;
  node.pending += messages;
  node.cells->published.fetch_add(messages, std::memory_order_relaxed);
  node.cells->pending.store(node.pending, std::memory_order_relaxed);
  node.awaiting.push_back(std::move(work));
  most_awaiting_ = std::max(most_awaiting_, node.awaiting.size());
  const Outgoing& sent = node.awaiting.back();
  auto& machine = node.connection->machine();
  std::error_code ec = sent.batch ? machine.publish_batch(sent.topic, sent.bodies)
                                  : machine.publish(sent.topic, sent.body,
                                                    static_cast<std::uint32_t>(sent.defer.count()));
  if (ec) {
    // Refused before anything was written: still the last one awaiting.
    Outgoing refused = std::move(node.awaiting.back());
    node.awaiting.pop_back();
    settled(node, refused, false);
    complete(refused, ec, "cannot publish to '" + refused.topic.str() + "': " + ec.message());
  }
}

void Producer::flush_waiting() {
  while (!waiting_.empty()) {
    Node* node = node_with_room();
    if (!node) return;
    Outgoing work = std::move(waiting_.front());
    waiting_.pop_front();
    count_waiting(work, false);
    send(*node, work);
  }
}

void Producer::connect_some() {
  // A rediscovery waiting out its backoff holds back no nsqd already known: one whose own backoff
  // has run out is dialled (the two waits are paced apart, and either may end first), and the
  // first that answers makes the rediscovery moot.
  if (closed_ || discovering_) return;
  if (nodes_.empty() && discover_) {
    if (!rediscover_pending_) discover_now();
    return;
  }
  if (spreads()) {
    // Every nsqd known is dialled, but those waiting out their backoff.
    bool live = false;
    for (auto& node : nodes_) {
      if (node->connection && (node->connection->ready() || node->connection->connecting())) {
        live = true;
        continue;
      }
      if (node->retry_scheduled) continue;
      dial(*node);
      live = true;
    }
    if (live) return;
  } else {
    // The nsqd are tried in the order given: the first one that is not waiting out its backoff.
    // Later ones are only connected when the earlier ones are down (failover).
    for (auto& node : nodes_) {
      if (node->connection && (node->connection->ready() || node->connection->connecting())) return;
      if (node->retry_scheduled) continue;
      return dial(*node);
    }
  }
  // Every nsqd known waits out its backoff.
  if (discover_ && !waiting_.empty())
    discover_later(lookupds_, make_error_code(polybus::errc::connect_failed),
                   "every nsqd known failed; asking nsqlookupd " + lookupds_ + " again");
}

void Producer::dial(Node& node) {
  std::shared_ptr<Node> shared;
  for (auto& known : nodes_)
    if (known.get() == &node) shared = known;
  if (!node.connection) node.connection = make_connection(shared);
  if (!node.reconnect)
    node.reconnect = std::make_unique<ReconnectLoop>(context_, node.target.to_string());
  node.cells->state.store(NodeState::connecting);
  node.reconnect->attempting();
  node.connection->connect();
}

void Producer::widen_from_untried() {
  while (!untried_.empty()) {
    auto widened = WidenedDial::take();
    if (!widened) return;  // the process's budget is spent: the usual bounds again
    auto node = make_node(std::move(untried_.front()), true);
    untried_.pop_front();
    node->widened = std::move(widened);
    nodes_.push_back(std::move(node));
  }
}

// connect_some(), within max_dials_per_second: a pass over a list of thousands of refusing nsqd
// is paced, not a burst.
void Producer::connect_paced() {
  if (dial_pacer_.admit([weak = weak_from_this()] {
        if (auto self = weak.lock(); self && !self->closed_ && !self->waiting_.empty())
          self->connect_paced();
      }))
    connect_some();
}

void Producer::discover_now() {
  discovering_ = true;
  std::weak_ptr<Producer> weak = shared_from_this();
  discover_([weak](Discovered found) {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    self->discovering_ = false;
    self->lookupds_ = found.where;
    self->set_nodes(std::move(found.nsqds), true);
    if (self->waiting_.empty()) return;
    if (!self->nodes_.empty()) return self->connect_some();
    // Nothing to publish to: say why, and ask again after the reconnect policy's delay while
    // publishes wait.
    self->discover_later(
        found.where, make_error_code(polybus::errc::connect_failed),
        found.failure.empty() ? "nsqlookupd " + found.where + " lists no nsqd" : found.failure);
  });
}

void Producer::discover_later(const std::string& where, std::error_code reason,
                              const std::string& why) {
  if (rediscover_pending_ || discovering_) return;
  rediscover_pending_ = true;
  auto delay = rediscover_->schedule([weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->rediscover_pending_ = false;
    if (!self->closed_) self->discover_now();
  });
  context_->state(ConnectionState::reconnecting, where, reason, why, delay);
}

std::shared_ptr<Connection> Producer::make_connection(const std::shared_ptr<Node>& node) {
  std::weak_ptr<Producer> weak = shared_from_this();
  std::weak_ptr<Node> weak_node = node;
  Connection::Events events;
  events.on_ready = [weak, weak_node] {
    auto self = weak.lock();
    auto raw = weak_node.lock();
    if (!self || !raw) return;
    // The backoff starts over at the first confirmed publish, not at the handshake: a server
    // that completes it and then breaks (never reads, refuses everything) must not get a
    // connection every reconnect_initial.
    raw->reconnect->connected();
    raw->failed = false;
    raw->widened.release();  // a kept connection now, no longer a dial
    self->node_ready(*raw);
    raw->ever_ready = true;
    if (self->rediscover_) {
      self->rediscover_->succeeded();  // discovery found a live nsqd
      // A live nsqd makes a pending "ask nsqlookupd again" moot.
      if (self->rediscover_pending_) {
        self->rediscover_->cancel();
        self->rediscover_pending_ = false;
      }
    }
    self->flush_waiting();
  };
  events.on_response = [weak, weak_node](std::string_view body) {
    auto self = weak.lock();
    auto raw = weak_node.lock();
    if (self && raw) self->on_response(*raw, body);
  };
  events.on_heartbeat = [weak_node] {
    if (auto raw = weak_node.lock()) raw->reconnect->proven();
  };
  events.on_write_room = [weak] {
    if (auto self = weak.lock()) self->flush_waiting();
  };
  events.on_server_error = [weak, weak_node](const ServerError& error) {
    auto self = weak.lock();
    auto raw = weak_node.lock();
    if (self && raw) self->on_server_error(*raw, error);
  };
  events.on_closed = [weak, weak_node](std::error_code ec, const std::string& detail) {
    auto self = weak.lock();
    auto raw = weak_node.lock();
    if (self && raw) self->on_closed(*raw, ec, detail);
  };
  return Connection::create(context_, node->target, settings_.machine, settings_.transport,
                            settings_.read_timeout, std::move(events));
}

void Producer::on_response(Node& node, std::string_view body) {
  if (!is_ok(body)) return;  // heartbeats are answered by the machine; nothing else is expected
  if (node.awaiting.empty()) {
    node.connection->fail(make_error_code(polybus::errc::protocol_error),
                          node.target.to_string() + ": OK with no publish waiting for it");
    return;
  }
  node.reconnect->proven();
  Outgoing answered = std::move(node.awaiting.front());
  node.awaiting.pop_front();
  settled(node, answered, true);
  complete(answered, {}, {});
  keep_vectors(answered);
}

void Producer::on_server_error(Node& node, const ServerError& error) {
  // Answers to a publish complete it in order; the connection closes after fatal ones.
  if (node.awaiting.empty()) {
    context_->error(make_error_code(error.code), node.target.to_string() + ": " +
                                                     std::string(error.code_text) + " " +
                                                     std::string(error.description));
    return;
  }
  Outgoing refused = std::move(node.awaiting.front());
  node.awaiting.pop_front();
  settled(node, refused, false);
  if (refused.gathered() &&
      (error.code_text == "E_BAD_MESSAGE" || error.code_text == "E_BAD_BODY")) {
    // nsqd checks a whole MPUB before it keeps any of it, so none was kept: each publish goes
    // again alone, first in line, and only the one at fault fails.
    for (std::size_t i = refused.dones.size(); i-- > 0;) {
      waiting_.push_front(Outgoing{refused.topic,
                                   std::move(refused.bodies[i]),
                                   {},
                                   {},
                                   std::move(refused.dones[i]),
                                   {},
                                   false});
      count_waiting(waiting_.front(), true);
    }
    if (usable_node())
      flush_waiting();
    else
      connect_some();
    return;
  }
  complete(refused, make_error_code(error.code),
           node.target.to_string() + ": " + std::string(error.code_text) + " " +
               std::string(error.description));
}

void Producer::on_closed(Node& node, std::error_code ec, const std::string& detail) {
  // Unanswered publishes go first in line again, in their order: at least once.
  auto awaiting = std::move(node.awaiting);
  node.awaiting.clear();
  for (const auto& lost : awaiting) {
    settled(node, lost, false);
    count_waiting(lost, true);
  }
  node.cells->state.store(NodeState::idle);
  waiting_.insert(waiting_.begin(), std::make_move_iterator(awaiting.begin()),
                  std::make_move_iterator(awaiting.end()));
  if (closed_) return;
  node.reconnect->ended(ec, detail);
  node.failed = true;
  if (node.discovered && !node.ever_ready && (!untried_.empty() || node.widened)) {
    // A discovered nsqd that never shook hands gives way at once to one not tried yet (with its
    // unit of the dial budget, if it had one); one dialled beyond the cap, with none left to
    // try, is let go.
    std::shared_ptr<Node> failed;
    for (auto& known : nodes_)
      if (known.get() == &node) failed = known;
    std::shared_ptr<Node> next;
    if (!untried_.empty()) {
      next = make_node(std::move(untried_.front()), true);
      untried_.pop_front();
      next->widened = std::move(node.widened);
    }
    if (failed) retire(failed);
    if (next) nodes_.push_back(std::move(next));
    if (ec == polybus::errc::timeout && spreads()) widen_from_untried();
    if (Node* other = usable_node()) {
      (void)other;
      flush_waiting();
    }
    if (!waiting_.empty()) connect_paced();
    return;
  }
  if (Node* other = usable_node()) {
    (void)other;
    flush_waiting();
  }
  // Failover is lazy: it reconnects when there is something to send. Spread, a failed nsqd is
  // probed with the backoff so that it comes back into the rotation.
  if (waiting_.empty() && !spreads()) return;
  node.retry_scheduled = true;
  node.cells->state.store(NodeState::backing_off);
  std::weak_ptr<Producer> weak = shared_from_this();
  std::weak_ptr<Node> weak_node;
  for (auto& known : nodes_)
    if (known.get() == &node) weak_node = known;
  node.reconnect->retry(ec, detail, [weak, weak_node] {
    auto self = weak.lock();
    auto raw = weak_node.lock();
    if (!self || !raw) return;
    raw->retry_scheduled = false;
    if (!self->waiting_.empty() || self->spreads()) self->connect_some();
  });
  // With nsqlookupd, once every nsqd known has failed: ask it again (paced), for others.
  const bool all_failed =
      std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->failed; });
  if (discover_ && all_failed)
    discover_later(lookupds_, make_error_code(polybus::errc::connect_failed),
                   "every nsqd known failed; asking nsqlookupd " + lookupds_ + " again");
  connect_some();  // the other nsqds, if any
}

void Producer::ping(OpCompletion done) {
  // nsqd answers nothing to NOP, so the round trip is a full handshake on a fresh connection.
  if (nodes_.empty())
    return done(make_error_code(polybus::errc::connect_failed), {}, "no nsqd known");
  auto finished = std::make_shared<OpCompletion>(std::move(done));
  auto holder = std::make_shared<std::shared_ptr<Connection>>();
  Connection::Events events;
  events.on_ready = [finished, holder] {
    (*finished)({});
    if (*holder) (*holder)->close();
    holder->reset();
  };
  events.on_closed = [finished, holder](std::error_code ec, const std::string& detail) {
    (*finished)(ec, {}, detail);
    holder->reset();
  };
  Node* node = usable_node();
  *holder =
      Connection::create(context_, node ? node->target : nodes_.front()->target, settings_.machine,
                         settings_.transport, settings_.read_timeout, std::move(events));
  (*holder)->connect();
}

void Producer::close() {
  closed_ = true;
  dial_pacer_.cancel();
  if (rediscover_) rediscover_->cancel();
  for (auto& node : nodes_) {
    if (node->reconnect) node->reconnect->closed();
    if (node->connection) node->connection->close_after_flush();
    auto awaiting = std::move(node->awaiting);
    for (auto& work : awaiting)
      complete(work, make_error_code(polybus::errc::closed), "client closed");
  }
  for (auto& work : waiting_)
    complete(work, make_error_code(polybus::errc::closed), "client closed");
  waiting_.clear();
  waiting_messages_ = 0;
  context_->waiting_publishes(0);
  Outgoing gathered = std::move(gathering_);
  gathering_ = Outgoing{};
  if (gathered.gathered())
    complete(gathered, make_error_code(polybus::errc::closed), "client closed");
}

}  // namespace polybus::nsq
