// SPDX-License-Identifier: Apache-2.0
// The in-process mem:// broker: topics with an offset log, consumer groups, ack/nack with delayed
// redelivery, redelivery after an ack timeout, replay from an offset, deferred publish and
// request/reply. `mem://name` connects to the broker of that name, created on first use, so a
// unit test needs nothing but the URL (and the scheme registered: register_scheme() below, or
// polybus/all.hpp's register_all_schemes()). Broker::get(name) gives tests control of it.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "polybus/metrics.hpp"

namespace polybus {
class ManualClock;
}  // namespace polybus

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

/// One operation a session of the broker asked for, or one delivery it was handed: what a test
/// broker's journal records and its fault rules match (Broker::set_observer). The views are
/// valid during the observer's call only.
struct POLYBUS_API BrokerEvent {
  std::uint64_t session = 0;  ///< the client's session
  bool received = true;       ///< asked for by the session, else handed to it
  /// publish, subscribe, ack, nack, touch, request, reply; deliver, request (handed over)
  std::string_view kind;
  std::string_view topic;   ///< where one is named or implied
  std::string_view group;   ///< the subscription's group, where known
  std::uint64_t id = 0;     ///< a delivery's id; 0: none
  std::int64_t count = -1;  ///< messages published, attempts, a nack's delay in ms, max_in_flight
  std::size_t bytes = 0;    ///< payload bytes
};

/// What the broker does instead of an operation or a delivery, as its observer says.
struct POLYBUS_API BrokerFault {
  /// none: as usual. On an operation: error fails it (broker_error), swallow reports success
  /// and does nothing, close drops the session, duplicate stores a publish twice. On a
  /// delivery: swallow withholds it, delay hands it over later, duplicate twice, error and
  /// close drop the session.
  enum class Action { none, error, swallow, delay, close, duplicate };
  Action action = Action::none;        ///< what to do
  bool fatal = false;                  ///< error: the session is dropped after it
  std::chrono::milliseconds delay{0};  ///< delay: how much later, on the broker's clock
};

/// Called under the broker's lock for every operation and delivery; it must not call back into
/// the broker.
using BrokerObserver = std::function<BrokerFault(const BrokerEvent&)>;

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
  void set_clock(std::shared_ptr<polybus::ManualClock> clock);
  /// Tells `observer` of every operation and delivery and does what it answers (mem's test
  /// broker keeps its journal and applies its fault rules so). Empty: none.
  void set_observer(BrokerObserver observer);
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
