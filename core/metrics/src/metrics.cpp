// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "metric_cells.hpp"
#include "polybus/metrics.hpp"

namespace polybus::detail {

namespace {
// The bucket bounds in whole nanoseconds: compared as integers, per message, instead of as doubles
// (every bound is a whole number of nanoseconds).
constexpr auto kUpperBoundsNs = [] {
  std::array<std::uint64_t, LatencyCells::kUpperBounds.size()> ns{};
  for (std::size_t i = 0; i < ns.size(); ++i)
    ns[i] = static_cast<std::uint64_t>(LatencyCells::kUpperBounds[i] * 1e9 + 0.5);
  return ns;
}();
}  // namespace

void LatencyCells::observe(Clock::duration elapsed) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  const std::uint64_t positive = ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
  // The first bound at or above it (Prometheus's "le"); past the last: the +Inf bucket. Looked
  // for from the smallest: what a client times (a handler, a confirm) mostly falls in the first
  // few buckets, found in as many compares, where a binary search takes four or five each time.
  std::size_t i = 0;
  while (i < kUpperBoundsNs.size() && kUpperBoundsNs[i] < positive) ++i;
  bump(buckets_[i]);
  bump(sum_ns_, positive);
}

metrics::Histogram LatencyCells::snapshot() const {
  metrics::Histogram h;
  h.upper_bounds.assign(kUpperBounds.begin(), kUpperBounds.end());
  h.upper_bounds.push_back(INFINITY);
  std::uint64_t running = 0;
  for (const auto& bucket : buckets_) {
    running += bucket.load(std::memory_order_relaxed);
    h.cumulative_counts.push_back(running);
  }
  h.count = running;
  h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return h;
}

TopicCells& TopicCellsMap::cells_for(const std::string& topic) {
  // Read without the lock: only the strand adds, and this is the strand.
  auto it = by_topic_.find(topic);
  if (it != by_topic_.end()) return *it->second;
  if (other_) return *other_;  // full
  std::lock_guard<std::mutex> lock(mutex_);
  const bool full = by_topic_.size() + 1 >= kMaxTopics;  // the last room is "_other"'s
  const std::string& key = full ? std::string(kOtherTopic) : topic;
  // A topic of the application's own named "_other" is already there: the rest joins it.
  auto [entry, added] = by_topic_.try_emplace(key);
  if (added) entry->second = std::make_unique<TopicCells>(key);
  if (full) other_ = entry->second.get();
  return *entry->second;
}

std::shared_ptr<PublishNodeCells> PublishNodeCellsList::add(std::string address) {
  auto cells = std::make_shared<PublishNodeCells>(std::move(address));
  std::lock_guard<std::mutex> lock(mutex_);
  nodes_.erase(
      std::remove_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.expired(); }),
      nodes_.end());
  nodes_.push_back(cells);
  return cells;
}

std::vector<metrics::PublishNodeMetrics> PublishNodeCellsList::snapshot() const {
  static constexpr const char* kStates[] = {"idle", "connecting", "ready", "backing_off"};
  std::vector<metrics::PublishNodeMetrics> out;
  std::lock_guard<std::mutex> lock(mutex_);
  nodes_.erase(
      std::remove_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.expired(); }),
      nodes_.end());
  for (const auto& weak : nodes_) {
    auto cells = weak.lock();
    if (!cells) continue;
    metrics::PublishNodeMetrics m;
    m.address = cells->address;
    m.state = kStates[static_cast<int>(cells->state.load(std::memory_order_relaxed))];
    m.published = cells->published.load(std::memory_order_relaxed);
    m.confirmed = cells->confirmed.load(std::memory_order_relaxed);
    m.failed = cells->failed.load(std::memory_order_relaxed);
    m.pending = cells->pending.load(std::memory_order_relaxed);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<metrics::TopicMetrics> TopicCellsMap::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<metrics::TopicMetrics> out;
  out.reserve(by_topic_.size());
  for (const auto& [name, cells] : by_topic_) {
    metrics::TopicMetrics t;
    t.topic = cells->topic;
    t.published = cells->published.load(std::memory_order_relaxed);
    t.confirmed = cells->confirmed.load(std::memory_order_relaxed);
    t.failed = cells->failed.load(std::memory_order_relaxed);
    t.confirm_latency = cells->confirm_latency.snapshot();
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.topic < b.topic; });
  return out;
}

}  // namespace polybus::detail

namespace polybus::metrics {

namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

Labels client_labels(const ClientMetrics& c) {
  return {{"client", c.client}, {"scheme", c.scheme}};
}
Labels topic_labels(const ClientMetrics& c, const TopicMetrics& t) {
  auto labels = client_labels(c);
  labels.emplace_back("topic", t.topic);
  return labels;
}
Labels node_labels(const ClientMetrics& c, const PublishNodeMetrics& n) {
  auto labels = client_labels(c);
  labels.emplace_back("node", n.address);
  return labels;
}
Labels subscription_labels(const ClientMetrics& c, const SubscriptionMetrics& s) {
  auto labels = client_labels(c);
  labels.emplace_back("topic", s.topic);
  labels.emplace_back("group", s.group);
  labels.emplace_back("kind", s.serving ? "serve" : "subscribe");
  return labels;
}

std::string bound_text(double bound) {
  if (std::isinf(bound)) return "+Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%g", bound);
  return text;
}

class Emitter {
 public:
  explicit Emitter(const std::function<void(const Sample&)>& visit) : visit_(visit) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    sample_.family = name;
    sample_.type = type;
    sample_.help = help;
  }
  void value(Labels labels, double value, std::string_view suffix = {}) {
    sample_.suffix = suffix;
    sample_.labels = std::move(labels);
    sample_.value = value;
    visit_(sample_);
  }
  void histogram(const Labels& labels, const Histogram& h) {
    for (std::size_t i = 0; i < h.upper_bounds.size() && i < h.cumulative_counts.size(); ++i) {
      auto with_le = labels;
      with_le.emplace_back("le", bound_text(h.upper_bounds[i]));
      value(std::move(with_le), static_cast<double>(h.cumulative_counts[i]), "_bucket");
    }
    value(labels, h.sum_seconds, "_sum");
    value(labels, static_cast<double>(h.count), "_count");
  }

 private:
  const std::function<void(const Sample&)>& visit_;
  Sample sample_;
};

template <typename Get>
void client_family(Emitter& e, const std::vector<ClientMetrics>& clients, std::string_view name,
                   std::string_view type, std::string_view help, Get get) {
  e.family(name, type, help);
  for (const auto& c : clients) e.value(client_labels(c), static_cast<double>(get(c)));
}

template <typename Get>
void topic_family(Emitter& e, const std::vector<ClientMetrics>& clients, std::string_view name,
                  std::string_view help, Get get) {
  e.family(name, "counter", help);
  for (const auto& c : clients)
    for (const auto& t : c.topics) e.value(topic_labels(c, t), static_cast<double>(get(t)));
}

template <typename Get>
void node_family(Emitter& e, const std::vector<ClientMetrics>& clients, std::string_view name,
                 std::string_view type, std::string_view help, Get get) {
  e.family(name, type, help);
  for (const auto& c : clients)
    for (const auto& n : c.publish_nodes) e.value(node_labels(c, n), static_cast<double>(get(n)));
}

template <typename Get>
void subscription_family(Emitter& e, const std::vector<ClientMetrics>& clients,
                         std::string_view name, std::string_view type, std::string_view help,
                         Get get) {
  e.family(name, type, help);
  for (const auto& c : clients)
    for (const auto& s : c.subscriptions)
      e.value(subscription_labels(c, s), static_cast<double>(get(s)));
}

void escape_label(std::string& out, std::string_view value) {
  for (char ch : value) {
    if (ch == '\\')
      out += "\\\\";
    else if (ch == '"')
      out += "\\\"";
    else if (ch == '\n')
      out += "\\n";
    else
      out += ch;
  }
}

void append_number(std::string& out, double value) {
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  char text[40];
  // Counts are whole numbers up to 2^53 exactly; sums of nanoseconds in seconds, 12 digits.
  if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15)
    std::snprintf(text, sizeof text, "%.0f", value);
  else
    std::snprintf(text, sizeof text, "%.12g", value);
  out += text;
}

}  // namespace

void for_each_sample(const std::vector<ClientMetrics>& clients,
                     const std::function<void(const Sample&)>& visit) {
  Emitter e(visit);
  client_family(e, clients, "polybus_publish_refused_total", "counter",
                "Publishes refused before reaching the broker adapter (client closed, not "
                "supported, invalid).",
                [](const ClientMetrics& c) { return c.publish_refused; });
  topic_family(e, clients, "polybus_publish_messages_total",
               "Messages handed to the broker adapter for publishing.",
               [](const TopicMetrics& t) { return t.published; });
  topic_family(e, clients, "polybus_publish_confirmed_total",
               "Publishes completed without error (broker-confirmed where the scheme confirms).",
               [](const TopicMetrics& t) { return t.confirmed; });
  topic_family(e, clients, "polybus_publish_failed_total",
               "Publishes completed with an error, timeouts included.",
               [](const TopicMetrics& t) { return t.failed; });
  e.family("polybus_publish_confirm_seconds", "histogram",
           "Time from a publish call to its successful completion.");
  for (const auto& c : clients)
    for (const auto& t : c.topics) e.histogram(topic_labels(c, t), t.confirm_latency);

  node_family(e, clients, "polybus_publish_node_messages_total", "counter",
              "Messages written to this node of the publisher's publish_strategy.",
              [](const PublishNodeMetrics& n) { return n.published; });
  node_family(e, clients, "polybus_publish_node_confirmed_total", "counter",
              "Of those, confirmed by the node.",
              [](const PublishNodeMetrics& n) { return n.confirmed; });
  node_family(e, clients, "polybus_publish_node_failed_total", "counter",
              "Of those, refused by the node or lost with its connection (sent again "
              "elsewhere where that was possible).",
              [](const PublishNodeMetrics& n) { return n.failed; });
  node_family(e, clients, "polybus_publish_node_pending_messages", "gauge",
              "Messages written to the node and not yet answered.",
              [](const PublishNodeMetrics& n) { return n.pending; });
  node_family(e, clients, "polybus_publish_node_up", "gauge",
              "1 while the node is ready to take publishes, 0 while it is out or idle.",
              [](const PublishNodeMetrics& n) { return n.state == "ready" ? 1 : 0; });
  subscription_family(e, clients, "polybus_received_messages_total", "counter",
                      "Messages the broker delivered to the subscription.",
                      [](const SubscriptionMetrics& s) { return s.received; });
  subscription_family(e, clients, "polybus_acked_messages_total", "counter",
                      "Messages acknowledged (including discarded ones, which are acked).",
                      [](const SubscriptionMetrics& s) { return s.acked; });
  subscription_family(e, clients, "polybus_nacked_messages_total", "counter",
                      "Messages given back for redelivery.",
                      [](const SubscriptionMetrics& s) { return s.nacked; });
  subscription_family(e, clients, "polybus_replied_messages_total", "counter",
                      "Requests answered by a serve() handler.",
                      [](const SubscriptionMetrics& s) { return s.replied; });
  subscription_family(e, clients, "polybus_discarded_messages_total", "counter",
                      "Messages over max_attempts, given to on_discard and acked.",
                      [](const SubscriptionMetrics& s) { return s.discarded; });
  subscription_family(e, clients, "polybus_dead_lettered_messages_total", "counter",
                      "Messages over max_attempts, published to the dead-letter topic and acked.",
                      [](const SubscriptionMetrics& s) { return s.dead_lettered; });
  subscription_family(e, clients, "polybus_delivered_raw_messages_total", "counter",
                      "Messages that were not a valid envelope (envelope=cloudevents), delivered "
                      "as they came.",
                      [](const SubscriptionMetrics& s) { return s.delivered_raw; });
  subscription_family(e, clients, "polybus_in_flight_messages", "gauge",
                      "Messages received and not yet answered.",
                      [](const SubscriptionMetrics& s) { return s.in_flight; });
  subscription_family(e, clients, "polybus_held_messages", "gauge",
                      "Messages waiting for a handler.",
                      [](const SubscriptionMetrics& s) { return s.held_messages; });
  subscription_family(e, clients, "polybus_held_bytes", "gauge",
                      "Payload bytes of the messages waiting for a handler.",
                      [](const SubscriptionMetrics& s) { return s.held_bytes; });
  subscription_family(e, clients, "polybus_batches_total", "counter",
                      "Batches handed to a subscribe_batch handler.",
                      [](const SubscriptionMetrics& s) { return s.batches; });
  subscription_family(e, clients, "polybus_batched_messages_total", "counter",
                      "Messages handed to a subscribe_batch handler in its batches.",
                      [](const SubscriptionMetrics& s) { return s.batched_messages; });
  subscription_family(e, clients, "polybus_handler_timeouts_total", "counter",
                      "Messages nacked by middleware::timeout, their handler still running.",
                      [](const SubscriptionMetrics& s) { return s.handler_timeouts; });
  subscription_family(e, clients, "polybus_handler_late_returns_total", "counter",
                      "Handlers that returned or threw after middleware::timeout's limit.",
                      [](const SubscriptionMetrics& s) { return s.handler_late_returns; });
  subscription_family(e, clients, "polybus_throttled_messages_total", "counter",
                      "Messages that waited for their turn in middleware::throttle.",
                      [](const SubscriptionMetrics& s) { return s.throttled_messages; });
  subscription_family(e, clients, "polybus_circuit_opened_total", "counter",
                      "Times middleware::circuit_breaker opened and paused the subscription.",
                      [](const SubscriptionMetrics& s) { return s.circuit_opened; });
  subscription_family(e, clients, "polybus_circuit_rejected_messages_total", "counter",
                      "Messages failed at once while middleware::circuit_breaker was open.",
                      [](const SubscriptionMetrics& s) { return s.circuit_rejected_messages; });
  subscription_family(e, clients, "polybus_deduplicated_messages_total", "counter",
                      "Messages acked by middleware::deduplicate without reaching the handler.",
                      [](const SubscriptionMetrics& s) { return s.deduplicated_messages; });
  e.family("polybus_handler_seconds", "histogram",
           "Time a handler ran per message (per batch for subscribe_batch).");
  for (const auto& c : clients)
    for (const auto& s : c.subscriptions) e.histogram(subscription_labels(c, s), s.handler_time);

  std::vector<ClientMetrics> requesters;  // the clients whose scheme has requests
  for (const auto& c : clients)
    if (c.request_reply) requesters.push_back(c);
  client_family(e, requesters, "polybus_requests_total", "counter", "Requests sent.",
                [](const ClientMetrics& c) { return c.totals.requests; });
  client_family(e, requesters, "polybus_request_replies_total", "counter",
                "Requests answered with a reply.",
                [](const ClientMetrics& c) { return c.totals.replies; });
  e.family("polybus_request_seconds", "histogram", "Time from a request to its reply.");
  for (const auto& c : requesters) e.histogram(client_labels(c), c.request_round_trip);
  client_family(e, clients, "polybus_reconnects_total", "counter",
                "Connections made again after one was lost.",
                [](const ClientMetrics& c) { return c.totals.reconnects; });
  client_family(e, clients, "polybus_received_bytes_total", "counter",
                "Bytes read from the broker.",
                [](const ClientMetrics& c) { return c.totals.bytes_in; });
  client_family(e, clients, "polybus_sent_bytes_total", "counter", "Bytes written to the broker.",
                [](const ClientMetrics& c) { return c.totals.bytes_out; });
  client_family(e, clients, "polybus_connected_endpoints", "gauge", "Broker connections up now.",
                [](const ClientMetrics& c) { return c.connected_endpoints; });
  client_family(e, clients, "polybus_waiting_publishes", "gauge",
                "Publishes the client holds unsent now, waiting for a broker connection or for "
                "room in the publish window.",
                [](const ClientMetrics& c) { return c.waiting_publishes; });
  client_family(e, requesters, "polybus_waiting_requests", "gauge",
                "Requests the client holds unsent now, waiting for a free request slot, a "
                "broker connection or the reply subscription.",
                [](const ClientMetrics& c) { return c.waiting_requests; });
}

namespace {

Labels broker_labels(const BrokerMetrics& b) {
  return {{"broker", b.broker}, {"scheme", b.scheme}};
}
Labels broker_topic_labels(const BrokerMetrics& b, const BrokerTopicMetrics& t) {
  auto labels = broker_labels(b);
  labels.emplace_back("topic", t.topic);
  return labels;
}
Labels broker_queue_labels(const BrokerMetrics& b, const BrokerQueueMetrics& q) {
  auto labels = broker_labels(b);
  labels.emplace_back("topic", q.topic);
  labels.emplace_back("group", q.group);
  return labels;
}

template <typename Get>
void broker_family(Emitter& e, const std::vector<BrokerMetrics>& brokers, std::string_view name,
                   std::string_view type, std::string_view help, Get get) {
  e.family(name, type, help);
  for (const auto& b : brokers) e.value(broker_labels(b), static_cast<double>(get(b)));
}

template <typename Get>
void broker_topic_family(Emitter& e, const std::vector<BrokerMetrics>& brokers,
                         std::string_view name, std::string_view type, std::string_view help,
                         Get get) {
  e.family(name, type, help);
  for (const auto& b : brokers)
    for (const auto& t : b.topics) e.value(broker_topic_labels(b, t), static_cast<double>(get(t)));
}

template <typename Get>
void broker_queue_family(Emitter& e, const std::vector<BrokerMetrics>& brokers,
                         std::string_view name, std::string_view type, std::string_view help,
                         Get get) {
  e.family(name, type, help);
  for (const auto& b : brokers)
    for (const auto& q : b.queues) e.value(broker_queue_labels(b, q), static_cast<double>(get(q)));
}

// The exposition text of every sample `produce` hands over, families in the order given.
template <typename Produce>
void write_samples(std::string& out, Produce produce) {
  std::string_view last_family;
  produce([&](const Sample& s) {
    if (s.family != last_family) {
      last_family = s.family;
      out += "# HELP ";
      out += s.family;
      out += ' ';
      out += s.help;  // no backslash or line break in ours
      out += "\n# TYPE ";
      out += s.family;
      out += ' ';
      out += s.type;
      out += '\n';
    }
    out += s.family;
    out += s.suffix;
    if (!s.labels.empty()) {
      out += '{';
      for (std::size_t i = 0; i < s.labels.size(); ++i) {
        if (i) out += ',';
        out += s.labels[i].first;
        out += "=\"";
        escape_label(out, s.labels[i].second);
        out += '"';
      }
      out += '}';
    }
    out += ' ';
    append_number(out, s.value);
    out += '\n';
  });
}

}  // namespace

void for_each_sample(const std::vector<BrokerMetrics>& brokers,
                     const std::function<void(const Sample&)>& visit) {
  Emitter e(visit);
  broker_family(e, brokers, "polybus_broker_up", "gauge",
                "1 while the in-process broker accepts connections, 0 while it is stopped.",
                [](const BrokerMetrics& b) { return b.running ? 1 : 0; });
  broker_family(e, brokers, "polybus_broker_connections", "gauge", "Clients connected now.",
                [](const BrokerMetrics& b) { return b.connections; });
  broker_family(e, brokers, "polybus_broker_connections_accepted_total", "counter",
                "Client connections accepted since the broker was launched.",
                [](const BrokerMetrics& b) { return b.connections_accepted; });
  broker_family(e, brokers, "polybus_broker_received_bytes_total", "counter",
                "Bytes read from clients.",
                [](const BrokerMetrics& b) { return b.bytes_received; });
  broker_family(e, brokers, "polybus_broker_sent_bytes_total", "counter",
                "Bytes written to clients.", [](const BrokerMetrics& b) { return b.bytes_sent; });
  broker_topic_family(e, brokers, "polybus_broker_published_messages_total", "counter",
                      "Messages (events, jobs) the broker accepted from clients for the topic.",
                      [](const BrokerTopicMetrics& t) { return t.published; });
  broker_topic_family(e, brokers, "polybus_broker_stored_messages", "gauge",
                      "Messages the topic itself keeps now (a log, or held until a channel).",
                      [](const BrokerTopicMetrics& t) { return t.stored; });
  broker_queue_family(e, brokers, "polybus_broker_delivered_messages_total", "counter",
                      "Messages handed to a consumer of the topic (and group), redeliveries "
                      "included.",
                      [](const BrokerQueueMetrics& q) { return q.delivered; });
  broker_queue_family(e, brokers, "polybus_broker_redelivered_messages_total", "counter",
                      "Deliveries of a message again, after a nack, a timeout or a restart.",
                      [](const BrokerQueueMetrics& q) { return q.redelivered; });
  broker_queue_family(e, brokers, "polybus_broker_acked_messages_total", "counter",
                      "Deliveries the consumer finished (acknowledged, answered).",
                      [](const BrokerQueueMetrics& q) { return q.acked; });
  broker_queue_family(e, brokers, "polybus_broker_queued_messages", "gauge",
                      "Messages waiting for a consumer now, deferred ones included.",
                      [](const BrokerQueueMetrics& q) { return q.queued; });
  broker_queue_family(e, brokers, "polybus_broker_in_flight_messages", "gauge",
                      "Messages delivered and not yet finished or given back.",
                      [](const BrokerQueueMetrics& q) { return q.in_flight; });
  broker_queue_family(e, brokers, "polybus_broker_consumers", "gauge",
                      "Subscribers, workers or responders of the topic (and group) now.",
                      [](const BrokerQueueMetrics& q) { return q.consumers; });
}

void write_prometheus(std::string& out, const std::vector<ClientMetrics>& clients) {
  write_samples(out, [&](const auto& visit) { for_each_sample(clients, visit); });
}

void write_prometheus(std::string& out, const std::vector<BrokerMetrics>& brokers) {
  write_samples(out, [&](const auto& visit) { for_each_sample(brokers, visit); });
}

}  // namespace polybus::metrics
