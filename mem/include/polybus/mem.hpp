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

/// The in-process mem:// broker and its scheme.
namespace polybus::mem {

// Registers the mem scheme (idempotent).
POLYBUS_API void register_scheme();

struct POLYBUS_API BrokerStats {
  std::uint64_t published = 0;
  std::uint64_t delivered = 0;   // deliveries, redeliveries included
  std::uint64_t redelivered = 0;
  std::uint64_t acked = 0;
  std::uint64_t connections = 0;  // open now
};

class BrokerImpl;

class POLYBUS_API Broker {
 public:
  // The broker of that name, created if it does not exist yet.
  static std::shared_ptr<Broker> get(const std::string& name);

  // Simulates a broker restart: every connection drops (clients see disconnected and reconnect
  // by themselves), unacknowledged messages go back to their groups. Topics, offsets and groups
  // are kept, as a durable broker keeps them.
  void restart();
  // Stops accepting connections and drops the open ones; start() accepts them again.
  void stop();
  void start();
  bool running() const;

  // Messages kept per topic for replay (oldest dropped first). Default 1,000,000.
  void set_retention(std::size_t messages);
  BrokerStats stats() const;
  // The same and more, per topic and group, in the terms every test broker uses.
  metrics::BrokerMetrics metrics() const;
  // Messages in the topic's log (published and not yet dropped by retention).
  std::uint64_t topic_size(const std::string& topic) const;

  const std::shared_ptr<BrokerImpl>& impl() const { return impl_; }
  explicit Broker(std::shared_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<BrokerImpl> impl_;
};

}  // namespace polybus::mem
