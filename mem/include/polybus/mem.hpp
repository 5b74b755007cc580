// SPDX-License-Identifier: Apache-2.0
// The in-process mem:// broker: topics with an offset log, consumer groups, ack/nack with delayed
// redelivery, redelivery after an ack timeout, replay from an offset, deferred publish and
// request/reply. `mem://name` connects to the broker of that name, created on first use, so a
// unit test needs nothing but the URL (and the scheme registered: register_scheme() below, or
// polybus/all.hpp's register_all_schemes()). Broker::get(name) gives tests control of it.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include "polybus/metrics.hpp"

namespace polybus::io {
class ManualClock;
}  // namespace polybus::io

/// The in-process mem:// broker and its scheme.
namespace polybus::mem {

/// Registers the mem scheme (idempotent).
POLYBUS_API void register_scheme();

/// A mem broker's counters since it was created (Broker::stats()).
struct POLYBUS_API BrokerStats {
  std::uint64_t published = 0;    ///< messages added to topic logs (a deferred one once due)
  std::uint64_t delivered = 0;    ///< deliveries, redeliveries included
  std::uint64_t redelivered = 0;  ///< deliveries of a message delivered before
  std::uint64_t acked = 0;        ///< deliveries acknowledged
  std::uint64_t connections = 0;  ///< open now
};

class BrokerImpl;

/// An in-process broker, the one `mem://name` connects to. Thread-safe. The brokers get() makes
/// live as long as the process: it returns the same one for a name every time.
class POLYBUS_API Broker {
 public:
  /// The broker of that name, created if it does not exist yet.
  static std::shared_ptr<Broker> get(const std::string& name);

  /// Simulates a broker restart: every connection drops (clients see disconnected and reconnect
  /// by themselves), unacknowledged messages go back to their groups. Topics, offsets and groups
  /// are kept, as a durable broker keeps them.
  void restart();
  /// Stops accepting connections and drops the open ones; start() accepts them again.
  void stop();
  /// Accepts connections again after stop(); nothing when it is running.
  void start();
  /// False between stop() and start().
  bool running() const;

  /// Messages kept per topic for replay (oldest dropped first; 0 counts as 1). Default 1,000,000.
  /// A topic's log is trimmed to it at its next publish.
  void set_retention(std::size_t messages);
  /// Puts the broker's timers (ack timeouts, nack delays, deferred publishes) on time the test
  /// controls (polybus/manual_clock.hpp): each comes due only as the clock is advanced, and is
  /// done before advance() returns. Null: the real clock again.
  void set_clock(std::shared_ptr<polybus::io::ManualClock> clock);
  /// The broker's counters so far.
  BrokerStats stats() const;
  /// The same and more, per topic and group, in the terms every test broker uses.
  metrics::BrokerMetrics metrics() const;
  /// Messages in the topic's log (published and not yet dropped by retention); 0 for an unknown
  /// topic.
  std::uint64_t topic_size(const std::string& topic) const;

  /// The broker's internals, for the mem adapter.
  const std::shared_ptr<BrokerImpl>& impl() const { return impl_; }
  /// Made by get(); the implementation is internal.
  explicit Broker(std::shared_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<BrokerImpl> impl_;
};

}  // namespace polybus::mem
