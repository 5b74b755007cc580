#include "producer.hpp"

#include "polybus/error.hpp"

namespace polybus::nsq {

Producer::Producer(std::shared_ptr<const AdapterContext> context, Settings settings, std::vector<HostPort> nsqds,
                   Discover discover)
    : context_(std::move(context)), settings_(std::move(settings)), discover_(std::move(discover)) {
  set_nodes(std::move(nsqds));
  if (discover_) rediscover_ = std::make_unique<Reconnector>(context_->strand(), context_->backoff());
}

void Producer::set_nodes(std::vector<HostPort> nsqds) {
  for (auto& target : nsqds) {
    bool known = false;
    for (auto& node : nodes_) known = known || node->target.to_string() == target.to_string();
    if (known) continue;
    auto node = std::make_unique<Node>();
    node->target = std::move(target);
    node->reconnect = std::make_unique<ReconnectLoop>(*context_, node->target.to_string());
    nodes_.push_back(std::move(node));
  }
}

Producer::Node* Producer::usable_node() {
  for (auto& node : nodes_)
    if (node->connection && node->connection->ready()) return node.get();
  return nullptr;
}

void Producer::publish(PublishWork work) {
  if (closed_) return work.done(make_error_code(polybus::errc::closed));
  if (!valid_topic_name(work.topic))
    return work.done(make_error_code(errc::invalid_name),
                     {}, "'" + work.topic + "' is not a valid NSQ topic (1-64 of [.a-zA-Z0-9_-])");
  if (work.defer.count() > 3'600'000)
    return work.done(make_error_code(polybus::errc::invalid_argument), {},
                     "deferred publish over nsqd's maximum (1h by default)");
  Outgoing out{std::move(work.topic), {}, work.defer, std::move(work.done)};
  out.bodies.reserve(work.payloads.size());
  for (auto& payload : work.payloads)
    out.bodies.push_back(std::make_shared<const std::string>(std::move(payload)));
  if (Node* node = usable_node()) return send(*node, out);
  waiting_.push_back(std::move(out));
  connect_some();
}

void Producer::send(Node& node, Outgoing& work) {
  if (work.done.done()) return;  // its deadline passed while it waited
  // Awaiting its answer before it is written: a write over max_write_buffer ends the connection
  // at once, and on_closed must find it there to send it again.
  node.awaiting.push_back(std::move(work));
  const Outgoing& sent = node.awaiting.back();
  auto& machine = node.connection->machine();
  std::error_code ec = sent.bodies.size() > 1
                           ? machine.publish_batch(sent.topic, sent.bodies)
                           : machine.publish(sent.topic, sent.bodies.front(),
                                             static_cast<std::uint32_t>(sent.defer.count()));
  if (ec) {
    // Refused before anything was written: still the last one awaiting.
    Outgoing refused = std::move(node.awaiting.back());
    node.awaiting.pop_back();
    refused.done(ec, {}, "cannot publish to '" + refused.topic + "': " + ec.message());
  }
}

void Producer::flush_waiting() {
  while (!waiting_.empty()) {
    Node* node = usable_node();
    if (!node) return;
    Outgoing work = std::move(waiting_.front());
    waiting_.pop_front();
    send(*node, work);
  }
}

void Producer::connect_some() {
  if (closed_) return;
  if (nodes_.empty() && discover_ && !discovering_ && !rediscover_pending_) {
    discovering_ = true;
    std::weak_ptr<Producer> weak = shared_from_this();
    discover_([weak](Discovered found) {
      auto self = weak.lock();
      if (!self || self->closed_) return;
      self->discovering_ = false;
      self->set_nodes(std::move(found.nsqds));
      if (!self->nodes_.empty()) {
        self->rediscover_->succeeded();
        return self->connect_some();
      }
      // Nothing to publish to: say why, and ask again after the reconnect policy's delay while
      // publishes wait.
      if (self->waiting_.empty()) return;
      self->rediscover_pending_ = true;
      auto delay = self->rediscover_->schedule([weak] {
        auto me = weak.lock();
        if (!me) return;
        me->rediscover_pending_ = false;
        if (!me->closed_) me->connect_some();
      });
      self->context_->state(
          ConnectionState::reconnecting, found.where, make_error_code(polybus::errc::connect_failed),
          found.failure.empty() ? "nsqlookupd " + found.where + " lists no nsqd" : found.failure,
          delay);
    });
    return;
  }
  // The nsqd are tried in the order given: the first one that is not waiting out its backoff.
  // Later ones are only connected when the earlier ones are down (failover).
  for (auto& node : nodes_) {
    if (node->connection && (node->connection->ready() || node->connection->connecting())) return;
    if (node->retry_scheduled) continue;
    if (!node->connection) node->connection = make_connection(*node);
    node->reconnect->attempting();
    node->connection->connect();
    return;
  }
}

std::shared_ptr<Connection> Producer::make_connection(Node& node) {
  std::weak_ptr<Producer> weak = shared_from_this();
  Node* raw = &node;  // nodes live as long as the producer (never removed)
  Connection::Events events;
  events.on_ready = [weak, raw] {
    auto self = weak.lock();
    if (!self) return;
    // The backoff starts over at the first confirmed publish, not at the handshake: a server
    // that completes it and then breaks (never reads, refuses everything) must not get a
    // connection every reconnect_initial.
    raw->reconnect->connected();
    self->flush_waiting();
  };
  events.on_response = [weak, raw](std::string_view body) {
    if (auto self = weak.lock()) self->on_response(*raw, body);
  };
  events.on_heartbeat = [raw] { raw->reconnect->proven(); };
  events.on_server_error = [weak, raw](const ServerError& error) {
    if (auto self = weak.lock()) self->on_server_error(*raw, error);
  };
  events.on_closed = [weak, raw](std::error_code ec, const std::string& detail) {
    if (auto self = weak.lock()) self->on_closed(*raw, ec, detail);
  };
  return Connection::create(context_, node.target, settings_.machine, settings_.transport,
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
  auto done = std::move(node.awaiting.front().done);
  node.awaiting.pop_front();
  done({});
}

void Producer::on_server_error(Node& node, const ServerError& error) {
  // Answers to a publish complete it in order; the connection closes after fatal ones.
  if (node.awaiting.empty()) {
    context_->error(make_error_code(error.code),
                   node.target.to_string() + ": " + std::string(error.code_text) + " " + std::string(error.description));
    return;
  }
  auto done = std::move(node.awaiting.front().done);
  node.awaiting.pop_front();
  done(make_error_code(error.code), {},
       node.target.to_string() + ": " + std::string(error.code_text) + " " + std::string(error.description));
}

void Producer::on_closed(Node& node, std::error_code ec, const std::string& detail) {
  // Unanswered publishes go first in line again, in their order: at least once.
  auto awaiting = std::move(node.awaiting);
  node.awaiting.clear();
  waiting_.insert(waiting_.begin(), std::make_move_iterator(awaiting.begin()),
                  std::make_move_iterator(awaiting.end()));
  if (closed_) return;
  node.reconnect->ended(ec, detail);
  if (Node* other = usable_node()) {
    (void)other;
    flush_waiting();
  }
  if (waiting_.empty()) return;  // lazy: reconnect when there is something to send
  node.retry_scheduled = true;
  std::weak_ptr<Producer> weak = shared_from_this();
  Node* raw = &node;
  node.reconnect->retry(ec, detail, [weak, raw] {
    auto self = weak.lock();
    if (!self) return;
    raw->retry_scheduled = false;
    if (!self->waiting_.empty()) self->connect_some();
  });
  connect_some();  // the other nsqds, if any
}

void Producer::ping(OpCompletion done) {
  // nsqd answers nothing to NOP, so the round trip is a full handshake on a fresh connection.
  if (nodes_.empty()) return done(make_error_code(polybus::errc::connect_failed), {}, "no nsqd known");
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
  *holder = Connection::create(context_, node ? node->target : nodes_.front()->target,
                               settings_.machine, settings_.transport, settings_.read_timeout,
                               std::move(events));
  (*holder)->connect();
}

void Producer::close() {
  closed_ = true;
  if (rediscover_) rediscover_->cancel();
  for (auto& node : nodes_) {
    node->reconnect->cancel();
    if (node->connection) node->connection->close_after_flush();
    auto awaiting = std::move(node->awaiting);
    for (auto& work : awaiting) work.done(make_error_code(polybus::errc::closed), {}, "client closed");
  }
  for (auto& work : waiting_) work.done(make_error_code(polybus::errc::closed), {}, "client closed");
  waiting_.clear();
}

}  // namespace polybus::nsq
