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

#include "polybus/metrics.hpp"

/// An in-process Figg broker for tests, and its test brokers.
namespace polybus::figg::testing {

struct POLYBUS_API BrokerOptions {
  // Listens on host:port; port 0 picks a free port (kept across stop()/start()).
  std::uint16_t port = 0;
  std::string host = "127.0.0.1";
  // As the real server: DETACH ignored (no DETACHED, DATA keeps coming), PING never answered,
  // a second ATTACH of a topic on a connection delivers alongside the first, an ATTACH from
  // beyond the log's end delivers nothing, and stop() forgets every log (a restarted server
  // starts each at offset 0).
  bool real_server_quirks = false;
  // Bytes kept per topic (0: everything); the oldest messages go first.
  std::size_t retention_bytes = 0;
  // Largest payload accepted; a bigger frame closes the connection.
  std::size_t max_payload = 64 << 20;
  // PEM files: with both, every connection is TLS from its first byte, and one whose TLS
  // handshake fails is closed.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class BrokerImpl;

class POLYBUS_API Broker {
 public:
  static std::unique_ptr<Broker> launch(BrokerOptions options = {});
  ~Broker();

  std::uint16_t port() const;
  std::string address() const;  // "127.0.0.1:port"
  // stop() closes the listener and every connection; the logs stay (a restart keeps them),
  // except with real_server_quirks.
  // start() listens again on the same port.
  void stop();
  void start();
  std::size_t connections() const;
  // Connections, bytes, and per topic what was published, kept and sent (docs/metrics.md).
  metrics::BrokerMetrics metrics() const;
  std::uint64_t end_offset(const std::string& topic) const;
  std::uint64_t messages(const std::string& topic) const;
  // PINGs answered with a PONG, on every connection so far; the wait returns false when there
  // are still fewer than n after `bound`.
  std::uint64_t pongs() const;
  bool wait_for_pongs(std::uint64_t n, std::chrono::milliseconds bound) const;
  // False: PINGs go unanswered from now on, as a server that stopped responding (unlike
  // real_server_quirks, the client may have seen PONGs before).
  void set_answer_pings(bool answer);

  explicit Broker(std::unique_ptr<BrokerImpl> impl);

 private:
  std::unique_ptr<BrokerImpl> impl_;
};

// Registers "figg" and "figg-quirks" with polybus::testing (the contract suite and the demo).
POLYBUS_API void register_test_brokers();

}  // namespace polybus::figg::testing
