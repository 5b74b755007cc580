// SPDX-License-Identifier: Apache-2.0
// A TCP proxy with faults, for tests: put it between a client and any broker (in-process or
// real) and make the network in between slow, thin, lossy or silent while traffic flows.
// In the manner of Toxiproxy, but in-process and without a control server.
//
//   polybus::testing::FaultProxy proxy({"127.0.0.1", broker_port});
//   auto client = polybus::connect("nsq://" + proxy.address());
//   proxy.set_faults(Direction::to_client, {.latency = 200ms});   // C++20; or set the fields
//   proxy.reset_connections();                                    // every connection, now
//
// Every method may be called from any thread, while connections are open; a change applies to
// the next byte each open connection forwards, and to every later connection.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace asio {
class io_context;
}

namespace polybus::testing {

/// Which way bytes travel: from the client to the upstream server, or back.
enum class Direction {
  to_upstream,  ///< from the client to the upstream server
  to_client     ///< from the upstream server back to the client
};

/// The faults of one direction. A default-constructed Faults forwards everything at once.
struct POLYBUS_API Faults {
  /// Every piece read waits this long before it is forwarded, plus a random share of `jitter`
  /// (uniform in [0, jitter], from the proxy's seed). Bytes keep their order.
  std::chrono::milliseconds latency{0};
  std::chrono::milliseconds jitter{0};  ///< the most added to `latency`, per piece read
  /// At most this many bytes per second (0: unlimited). Beyond the proxy's buffer the proxy
  /// stops reading, so the sender feels it as a slow link.
  std::uint64_t bytes_per_second = 0;
  /// After this many more bytes (counted from when the faults were set, or from the connection's
  /// start) have been forwarded, both sides of the connection are reset (RST): a cut in the middle
  /// of whatever frame those bytes began. 0: never.
  std::uint64_t reset_after_bytes = 0;
  /// Forward in pieces of at most `slice_bytes` (0: as read), `slice_delay` apart.
  std::size_t slice_bytes = 0;
  std::chrono::milliseconds slice_delay{0};  ///< between two pieces; only with slice_bytes set
  /// Read and hold: nothing is forwarded, not even the sender's close or reset, until the
  /// blackhole is lifted; then what was held goes on, as TCP's retransmissions would once a path
  /// heals (a TCP stream never loses bytes from its middle). A peer that stops answering without
  /// closing. Beyond max_buffered_bytes held, the proxy stops reading.
  bool blackhole = false;
};

/// Where a FaultProxy listens and forwards to, and how it runs.
struct POLYBUS_API FaultProxyOptions {
  std::string upstream_host = "127.0.0.1";  ///< an address or a name, resolved once at start
  std::uint16_t upstream_port = 0;          ///< the upstream server's port
  std::string listen_host = "127.0.0.1";    ///< an IP address, loopback unless allowed otherwise
  std::uint16_t listen_port = 0;            ///< 0: a free port
  /// A fault proxy listening beyond loopback is a hole in a test machine: only when asked for.
  bool allow_non_loopback = false;
  /// The jitter's random numbers: the same seed, the same delays for the same traffic.
  std::uint64_t seed = 1;
  /// Bytes read and not yet forwarded, per connection and direction; reading stops beyond it.
  std::size_t max_buffered_bytes = 4u << 20;
  /// Run on this io_context (which the caller runs, on any number of threads) instead of a thread
  /// of the proxy's own. It must outlive the proxy, and be running when the proxy is destroyed.
  asio::io_context* io_context = nullptr;
};

/// What a FaultProxy carried so far, over every connection (FaultProxy::counters()).
struct POLYBUS_API FaultProxyCounters {
  /// The bytes of one direction.
  struct Flow {
    std::uint64_t read = 0;       ///< bytes read from the sender
    std::uint64_t forwarded = 0;  ///< bytes written to the receiver
    std::uint64_t discarded = 0;  ///< bytes dropped by a half-close, a reset or stop()
  };
  /// The bytes from the client to the upstream server.
  Flow to_upstream, to_client;  ///< the bytes from the upstream server to the client
  std::uint64_t accepted = 0;   ///< connections proxied
  std::uint64_t refused = 0;    ///< connections reset at once while refusing
  std::uint64_t active = 0;     ///< connections open now
  std::uint64_t resets = 0;  ///< connections the proxy reset (reset_after_bytes, reset_connections)
  std::uint64_t upstream_failures = 0;  ///< connections whose upstream could not be reached
  /// The bytes of direction `d`.
  const Flow& flow(Direction d) const {
    return d == Direction::to_upstream ? to_upstream : to_client;
  }
};

/// A TCP proxy between clients and one upstream server, with the Faults of each direction
/// applied to the bytes it forwards. Each accepted connection gets a connection of its own to
/// the upstream server; one whose upstream cannot be reached is reset.
class POLYBUS_API FaultProxy {
 public:
  /// Listens at once; throws std::system_error when the address cannot be bound or resolved, and
  /// std::invalid_argument for a non-loopback listen address that was not allowed.
  explicit FaultProxy(FaultProxyOptions options);
  /// Stops listening and closes every connection at once (nothing held is forwarded).
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  /// The port it listens on (the one picked, for listen_port 0).
  std::uint16_t port() const;
  /// listen_host:port ("127.0.0.1:PORT" by default), to put in a URL.
  std::string address() const;

  /// Replaces the faults of `direction`; the count of reset_after_bytes starts again.
  void set_faults(Direction direction, const Faults& faults);
  /// The same faults for both directions.
  void set_faults(const Faults& faults);
  /// The faults of `direction` now.
  Faults faults(Direction direction) const;
  /// No faults, both directions; already delayed bytes keep their time.
  void clear_faults();

  /// Resets every open connection now (RST to both sides; bytes not yet forwarded are dropped).
  void reset_connections();
  /// Half-open: the receiver of `direction` on every open connection gets a FIN now (bytes not yet
  /// forwarded are dropped) and nothing more that way; the other direction goes on.
  void close_one_side(Direction direction);
  /// New connections are reset as soon as they are accepted, for this long (0: stop refusing).
  void refuse_connections(std::chrono::milliseconds how_long);

  /// What the proxy carried so far.
  FaultProxyCounters counters() const;

  /// Stops listening and closes every connection now, as the destructor does; idempotent.
  void stop();

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace polybus::testing
