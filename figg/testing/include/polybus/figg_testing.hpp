// SPDX-License-Identifier: Apache-2.0
// An in-process Figg broker for tests: an in-memory log per topic with offsets as byte positions
// (4-byte length + data per message, as the real server keeps them), ATTACH at the latest message
// or from an offset, history streamed as fast as the client reads then live messages, an ACK per
// PUBLISH, PING/PONG, DETACH answered with DETACHED, optional retention (an expired offset starts
// from the oldest message), and a switch that makes it fall short where the real server does.
//
//   auto broker = polybus::figg::testing::Broker::launch();
//   auto client = polybus::connect("figg://" + broker->address());
//
// With BrokerOptions::tls_cert_file and tls_key_file, clients connect with "?tls=true".
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/metrics.hpp"

/// An in-process Figg broker for tests, and its test brokers.
namespace polybus::figg::testing {

/// How a test Figg broker listens and behaves.
struct POLYBUS_API BrokerOptions {
  /// Listens on host:port; port 0 picks a free port (kept across stop()/start()).
  std::uint16_t port = 0;
  std::string host = "127.0.0.1";  ///< an IP address
  /// As the real server: DETACH ignored (no DETACHED, DATA keeps coming), PING never answered,
  /// a second ATTACH of a topic on a connection delivers alongside the first, an ATTACH from
  /// beyond the log's end delivers nothing, and stop() forgets every log (a restarted server
  /// starts each at offset 0).
  bool real_server_quirks = false;
  /// Bytes kept per topic, 4 per message besides its data (0: everything); the oldest messages
  /// go first, the newest always stays.
  std::size_t retention_bytes = 0;
  /// Largest payload accepted; a bigger frame closes the connection.
  std::size_t max_payload = 64 << 20;
  /// PEM files: with both, every connection is TLS from its first byte, and one whose TLS
  /// handshake fails is closed.
  std::string tls_cert_file;
  std::string tls_key_file;  ///< the private key of tls_cert_file (PEM)

  /// Entries the journal keeps (Broker::journal()): each message a connection sends (ATTACH,
  /// DETACH, PUBLISH, PING) and each it is sent (ATTACHED, DETACHED, ACK, PONG, DATA), with its
  /// topic, offset or sequence number (id) and data bytes. 0 keeps none and costs nothing.
  std::size_t journal_capacity = 0;
  /// Fault rules in force from the start (Broker::faults() changes them later). A rule's unit is
  /// a message type a client sends (ATTACH, DETACH, PUBLISH, PING) or DATA (a delivery). Figg
  /// has no error message: `error` closes the connection, as the real server does when it
  /// fails; duplicate carries a message out twice (a PUBLISH logged twice, a DATA sent twice).
  std::vector<polybus::testing::FaultRule> faults;
};

class BrokerImpl;

/// A Figg broker on an io thread of its own. Every method may be called from any thread.
class POLYBUS_API Broker {
 public:
  /// Listens at once. Throws std::system_error when host:port cannot be bound (or host is not an
  /// IP address), std::runtime_error when the TLS files cannot be loaded.
  static std::unique_ptr<Broker> launch(BrokerOptions options = {});
  /// Closes the listener and every connection.
  ~Broker();

  /// The port it listens on (the one picked, for port 0).
  std::uint16_t port() const;
  /// "127.0.0.1:port", for a URL.
  std::string address() const;
  /// stop() closes the listener and every connection; the logs stay (a restart keeps them),
  /// except with real_server_quirks.
  void stop();
  /// start() listens again on the same port; nothing while it listens. Throws std::system_error
  /// if the port cannot be bound.
  void start();
  /// Connections open now.
  std::size_t connections() const;
  /// Connections, bytes, and per topic what was published, kept and sent (docs/metrics.md).
  metrics::BrokerMetrics metrics() const;
  /// The topic's end: the byte offset its next message will have (0 for an unknown topic).
  std::uint64_t end_offset(const std::string& topic) const;
  /// Messages published to the topic's log, those retention dropped included (0 for an unknown
  /// topic).
  std::uint64_t messages(const std::string& topic) const;
  /// PINGs answered with a PONG, on every connection so far.
  std::uint64_t pongs() const;
  /// Waits until pongs() is at least `n`; false when there are still fewer than n after `bound`.
  bool wait_for_pongs(std::uint64_t n, std::chrono::milliseconds bound) const;
  /// False: PINGs go unanswered from now on, as a server that stopped responding (unlike
  /// real_server_quirks, the client may have seen PONGs before). True answers them again.
  void set_answer_pings(bool answer);
  /// What the connections sent and were sent (BrokerOptions::journal_capacity).
  polybus::testing::Journal& journal() const;
  /// The fault rules in force (BrokerOptions::faults).
  polybus::testing::FaultRules& faults() const;

  /// Made by launch(); the implementation is internal.
  explicit Broker(std::unique_ptr<BrokerImpl> impl);

 private:
  std::unique_ptr<BrokerImpl> impl_;
};

/// Registers "figg" and "figg-quirks" (real_server_quirks) with polybus::testing (the contract
/// suite and the demo); both use the figg scheme.
POLYBUS_API void register_test_brokers();

}  // namespace polybus::figg::testing
