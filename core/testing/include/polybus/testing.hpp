// SPDX-License-Identifier: Apache-2.0
// In-process brokers for tests and the demo. Each protocol's testing library registers a
// factory; the contract suite and `polybus demo` run against every registered one.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/metrics.hpp"

/// Test support: the registry of in-process test brokers and a TCP proxy with faults.
namespace polybus::testing {

/// polybus::ManualClock (polybus/manual_clock.hpp), also under the test brokers' namespace.
using ManualClock = polybus::ManualClock;

/// A running test broker of some protocol, as a TestBrokerFactory starts it.
class POLYBUS_API TestBroker {
 public:
  virtual ~TestBroker() = default;
  /// A URL for clients, with options that keep tests fast (short timeouts and backoff).
  virtual std::string url() const = 0;
  /// Stop drops every connection and refuses new ones; start accepts them again, on the same port,
  /// which no other socket can take in between. The broker keeps its messages across the two
  /// where the protocol's real broker does.
  virtual void stop() = 0;
  /// Accepts connections again after stop(), on the same port.
  virtual void start() = 0;
  /// stop() then start(): clients see their connections drop, and reconnect.
  void restart() {
    stop();
    start();
  }
  /// False for brokers that never answer the protocol's ping (the older Figg server).
  virtual bool answers_ping() const { return true; }
  /// What the broker carried so far (docs/metrics.md), for `polybus broker --metrics` and tests;
  /// every in-process broker counts, a stand-in for a real server (nsq-real, figg-real) does not.
  /// `broker` is left for the caller to name.
  virtual std::optional<metrics::BrokerMetrics> metrics() const { return std::nullopt; }
  /// What its connections sent and were sent (polybus/journal.hpp), recording when it was
  /// started with a journal_capacity; null for a stand-in for a real server.
  virtual Journal* journal() { return nullptr; }
  /// The fault rules it applies (polybus/fault_rules.hpp); null for a stand-in for a real
  /// server.
  virtual FaultRules* faults() { return nullptr; }
  /// The clock its timers run on when it was started with one (TestBrokerOptions::clock).
  virtual std::shared_ptr<ManualClock> clock() const { return nullptr; }
};

/// What a test broker starts with beyond its protocol's defaults, the same for every broker.
struct POLYBUS_API TestBrokerOptions {
  std::uint16_t port = 0;            ///< the URL's port on 127.0.0.1; 0: a free one
  std::size_t journal_capacity = 0;  ///< the journal's entries kept; 0: it records nothing
  std::vector<FaultRule> faults;     ///< rules in force from the start
  /// Time the test controls: the broker's timers (message timeouts, delays, deferrals, job
  /// timeouts, expiries) come due only as it is advanced. Null: the real clock.
  std::shared_ptr<ManualClock> clock;
};

/// How to start one kind of test broker; each protocol's testing library registers its own.
struct POLYBUS_API TestBrokerFactory {
  std::string name;                                    ///< e.g. "mem", "nsq", "nsq+lookupd"
  std::string scheme;                                  ///< the URL scheme its url() uses
  std::function<std::unique_ptr<TestBroker>()> start;  ///< 127.0.0.1, a free port
  /// The same on 127.0.0.1:port (the port of the URL); empty for a broker with no TCP port (mem,
  /// memodb+ipc). Throws std::system_error when the port cannot be bound.
  std::function<std::unique_ptr<TestBroker>(std::uint16_t port)> start_on_port = {};
  /// With TestBrokerOptions; empty for a stand-in for a real server. A port other than 0 throws
  /// std::invalid_argument for a broker with no TCP port.
  std::function<std::unique_ptr<TestBroker>(const TestBrokerOptions&)> start_with = {};
};

/// Adds `factory` to the registry; one registered earlier under the same name is replaced.
POLYBUS_API void register_test_broker(TestBrokerFactory factory);
/// Every registered factory, sorted by name.
POLYBUS_API std::vector<TestBrokerFactory> test_brokers();

}  // namespace polybus::testing
