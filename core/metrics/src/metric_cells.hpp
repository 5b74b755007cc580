// SPDX-License-Identifier: Apache-2.0
// Internal: where the client's metrics are counted. Relaxed atomics written on the hot paths
// (no lock, no allocation per message), read by snapshots (polybus/metrics.hpp).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/publish_node.hpp"
#include "polybus/metrics.hpp"

namespace polybus::detail {

// Latencies in fixed buckets from 100 µs to 10 s (and +Inf).
class LatencyCells {
 public:
  static constexpr std::array<double, 16> kUpperBounds{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  void observe(Clock::duration elapsed) noexcept;
  metrics::Histogram snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kUpperBounds.size() + 1> buckets_{};  // not cumulative
  std::atomic<std::uint64_t> sum_ns_{0};
};

struct TopicCells {
  explicit TopicCells(std::string topic) : topic(std::move(topic)) {}
  const std::string topic;
  std::atomic<std::uint64_t> published{0}, confirmed{0}, failed{0};
  LatencyCells confirm_latency;
};

// Publishes per topic. Looked up and added to only on the client's strand; snapshots read it
// from any thread, under the lock that additions take. Past max_topics, topics share one
// "_other" entry: a label per topic must not grow without bound.
class TopicCellsMap {
 public:
  static constexpr std::size_t kMaxTopics = 1000;
  static constexpr const char* kOtherTopic = "_other";

  TopicCells& cells_for(const std::string& topic);  // strand only
  std::vector<metrics::TopicMetrics> snapshot() const;

 private:
  mutable std::mutex mutex_;  // additions and snapshots
  std::unordered_map<std::string, std::unique_ptr<TopicCells>> by_topic_;
  TopicCells* other_ = nullptr;
};

struct SubscriptionCells {
  // Each on a cache line of its own: the io thread counts receipts, handler threads the answers
  // and the handler's time, each for every message (AtomicStats says why).
  alignas(64) std::atomic<std::uint64_t> received{0}, acked{0}, nacked{0}, replied{0}, discarded{0},
      dead_lettered{0}, delivered_raw{0};
  // Done without an answer, where the scheme has no acks: the handler returned, or the
  // message was released unhandled. Only for in_flight.
  alignas(64) std::atomic<std::uint64_t> settled{0};
  alignas(64) LatencyCells handler_time;
  // subscribe_batch: batches handed to the handler, and the messages in them.
  std::atomic<std::uint64_t> batches{0}, batched_messages{0};
  // What the ready middleware (polybus/middleware.hpp) did.
  std::atomic<std::uint64_t> handler_timeouts{0}, handler_late_returns{0}, throttled_messages{0},
      circuit_opened{0}, circuit_rejected_messages{0}, deduplicated_messages{0};
};

// The nodes an adapter publishes to, while it holds their cells (a retired node drops out).
class PublishNodeCellsList {
 public:
  std::shared_ptr<PublishNodeCells> add(std::string address);
  std::vector<metrics::PublishNodeMetrics> snapshot() const;

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::weak_ptr<PublishNodeCells>> nodes_;  // pruned by snapshots
};

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept {
  counter.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace polybus::detail
