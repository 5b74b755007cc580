// SPDX-License-Identifier: Apache-2.0
// Metrics of a client, its publishes per topic and its subscriptions, for a monitoring system:
// Client::metrics() takes a snapshot (counters kept with relaxed atomics, no lock or allocation
// per message); write_prometheus() renders snapshots in the Prometheus text exposition format
// (version 0.0.4), and for_each_sample() hands the same samples to a callback, for users who push
// to another system.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "polybus/events.hpp"

/// Snapshots of what clients and test brokers counted, and their rendering for Prometheus.
namespace polybus::metrics {

/// A latency histogram: counts per upper bound (seconds, cumulative as Prometheus has them; the
/// last bound is +Inf), their sum in seconds and the number of observations.
struct POLYBUS_API Histogram {
  std::vector<double> upper_bounds;  ///< ascending, in seconds; the last one is +Inf
  /// Observations at or below each bound, one count per upper bound.
  std::vector<std::uint64_t> cumulative_counts;
  double sum_seconds = 0;   ///< every observation added up, in seconds
  std::uint64_t count = 0;  ///< the number of observations
};

/// Publishes to one topic (past 1,000 topics per client the rest are summed under "_other").
struct POLYBUS_API TopicMetrics {
  std::string topic;            ///< the topic, or "_other"
  std::uint64_t published = 0;  ///< messages handed to the adapter
  /// Completed without error (what that means: the scheme's publish_confirmed capability).
  std::uint64_t confirmed = 0;
  std::uint64_t failed = 0;   ///< completed with an error, timeouts included
  Histogram confirm_latency;  ///< publish call to completion, confirmed ones
};

/// What one live subscription or serve() registration received and did with it.
struct POLYBUS_API SubscriptionMetrics {
  std::string topic;                ///< the topic subscribed to (or served)
  std::string group;                ///< empty: none
  bool serving = false;             ///< a serve() registration
  std::uint64_t received = 0;       ///< handed to the subscription by the adapter
  std::uint64_t acked = 0;          ///< acknowledged, discarded ones included (they are acked)
  std::uint64_t nacked = 0;         ///< given back for redelivery
  std::uint64_t replied = 0;        ///< serve: answers sent
  std::uint64_t discarded = 0;      ///< over max_attempts
  std::uint64_t dead_lettered = 0;  ///< over max_attempts, published to the dead-letter topic
  std::uint64_t delivered_raw = 0;  ///< not a valid envelope: delivered as they came
  std::uint64_t in_flight = 0;  ///< received, not yet answered (acked, nacked, replied, discarded)
  std::uint64_t held_messages = 0;     ///< waiting for a handler now
  std::uint64_t held_bytes = 0;        ///< the payload bytes of held_messages
  Histogram handler_time;              ///< handler start to return (a batch's handler: per batch)
  std::uint64_t batches = 0;           ///< subscribe_batch: batches handed to the handler
  std::uint64_t batched_messages = 0;  ///< the messages in them
  // What the ready middleware (polybus/middleware.hpp) did.
  std::uint64_t handler_timeouts = 0;      ///< middleware::timeout: messages nacked at the limit
  std::uint64_t handler_late_returns = 0;  ///< handlers that returned (or threw) after it
  std::uint64_t throttled_messages = 0;    ///< middleware::throttle: messages that waited
  std::uint64_t circuit_opened = 0;        ///< middleware::circuit_breaker: times it opened
  std::uint64_t circuit_rejected_messages = 0;  ///< failed at once while it was open
  std::uint64_t deduplicated_messages = 0;      ///< middleware::deduplicate: acked, not handled
};

/// One broker node a publisher spreads its publishes over (nsq:// with several nsqd, or the nsqd
/// nsqlookupd lists), by the scheme's publish_strategy.
struct POLYBUS_API PublishNodeMetrics {
  std::string address;  ///< the node's host:port
  std::string state;    ///< "ready", "connecting", "backing_off" (out, probed again), "idle"
  std::uint64_t published = 0;  ///< messages written to it
  std::uint64_t confirmed = 0;  ///< of which it confirmed
  std::uint64_t failed = 0;     ///< of which it refused, or lost with its connection
  std::uint64_t pending = 0;    ///< now: written, not yet answered
};

/// A snapshot of one client (Client::metrics()).
struct POLYBUS_API ClientMetrics {
  std::string client;                 ///< ConnectOptions::name, or a number unique in the process
  std::string scheme;                 ///< the scheme of the client's URL
  Stats totals;                       ///< the client's counters (Client::stats())
  std::uint64_t publish_refused = 0;  ///< refused before reaching the adapter (closed, ...)
  std::uint64_t connected_endpoints = 0;  ///< connections up now
  /// Now: publishes the client holds unsent, waiting for a broker connection or for room in the
  /// scheme's publish window (Figg's `window`); requests sent over topics are among them.
  std::uint64_t waiting_publishes = 0;
  /// Now: requests the client holds unsent, waiting for a free slot (MemoDB's `max_requests`),
  /// a broker connection, or the client's reply subscription (request/reply over topics).
  std::uint64_t waiting_requests = 0;
  bool request_reply = false;        ///< the scheme has requests: the request series exist
  Histogram request_round_trip;      ///< request call to its reply, replied ones
  std::vector<TopicMetrics> topics;  ///< publishes per topic, sorted by topic
  std::vector<SubscriptionMetrics> subscriptions;  ///< one per live subscription
  /// Where the scheme spreads publishes over nodes.
  std::vector<PublishNodeMetrics> publish_nodes;
};

/// What an in-process test broker (polybus/testing.hpp, `polybus broker NAME --metrics`) carried,
/// in the same terms for every protocol. docs/metrics.md says what each count means per protocol.
struct POLYBUS_API BrokerTopicMetrics {
  std::string topic;            ///< a topic, a QuickIO path, a MemoDB service
  std::uint64_t published = 0;  ///< messages and requests (events, jobs) accepted from clients
  std::uint64_t stored = 0;     ///< now: kept by the topic itself (a log, or held until a channel)
};

/// The consumers of a topic: an NSQ channel, a mem group, or a topic's subscribers, workers or
/// responders where the protocol has no groups (group empty).
struct POLYBUS_API BrokerQueueMetrics {
  std::string topic;              ///< the topic they consume
  std::string group;              ///< the channel or group; empty where there is none
  std::uint64_t delivered = 0;    ///< handed to a consumer, redeliveries included
  std::uint64_t redelivered = 0;  ///< of which deliveries again (after a nack, timeout or restart)
  std::uint64_t acked = 0;        ///< finished by the consumer (FIN, ack, RESULT, callback answer)
  std::uint64_t queued = 0;       ///< now: waiting for a consumer, deferred ones included
  std::uint64_t in_flight = 0;    ///< now: delivered and not yet finished or given back
  std::uint64_t consumers = 0;    ///< now: subscribers, workers or responders
};

/// A snapshot of one in-process test broker (TestBroker::metrics()).
struct POLYBUS_API BrokerMetrics {
  std::string broker;                      ///< its name, e.g. "nsq" or "figg-quirks"
  std::string scheme;                      ///< the URL scheme clients use for it
  bool running = false;                    ///< accepting connections (not stopped)
  std::uint64_t connections = 0;           ///< now: clients connected
  std::uint64_t connections_accepted = 0;  ///< since it was launched
  std::uint64_t bytes_received = 0;        ///< from clients
  std::uint64_t bytes_sent = 0;            ///< to clients
  std::vector<BrokerTopicMetrics> topics;  ///< sorted by topic
  std::vector<BrokerQueueMetrics> queues;  ///< sorted by topic, then group
};

/// One sample line: family "polybus_publish_confirm_seconds", suffix "_bucket", labels with "le".
struct POLYBUS_API Sample {
  std::string_view family;  ///< the metric family's name, e.g. "polybus_publish_messages_total"
  std::string_view type;    ///< "counter", "gauge" or "histogram"
  std::string_view help;    ///< the family's one-line description
  std::string_view suffix;  ///< "", or for histograms "_bucket", "_sum", "_count"
  /// Label names and values, e.g. ("client", "billing"), ("topic", "orders").
  std::vector<std::pair<std::string_view, std::string>> labels;
  double value = 0;  ///< the sample's value
};

/// Every sample of `clients`, one family after another (all of a family's series together, as
/// the exposition format requires).
POLYBUS_API void for_each_sample(const std::vector<ClientMetrics>& clients,
                                 const std::function<void(const Sample&)>& visit);

/// The same for brokers: families polybus_broker_*, labelled by broker (and topic, group).
POLYBUS_API void for_each_sample(const std::vector<BrokerMetrics>& brokers,
                                 const std::function<void(const Sample&)>& visit);

/// Appends the Prometheus text exposition of `clients` to `out`.
POLYBUS_API void write_prometheus(std::string& out, const std::vector<ClientMetrics>& clients);
/// Appends the Prometheus text exposition of `brokers` to `out`.
POLYBUS_API void write_prometheus(std::string& out, const std::vector<BrokerMetrics>& brokers);
/// The content type a /metrics endpoint answers with.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace polybus::metrics
