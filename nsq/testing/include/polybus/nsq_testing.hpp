// SPDX-License-Identifier: Apache-2.0
// An in-process nsqd and nsqlookupd for tests. They speak the TCP protocol V2, nsqd's and
// nsqlookupd's HTTP APIs and nsqlookupd's TCP protocol as nsqd and nsqlookupd 1.3 do, closely
// enough for the real clients (go-nsq, pynsq, nsqjs), the real servers (each registers with the
// other's) and polybus's adapter, with knobs to make tests fast and accessors to check the
// broker's state. docs/testing.md lists what differs.
//
//   auto nsqd = polybus::nsq::testing::Nsqd::start();          // 127.0.0.1, a free port
//   connect_to(nsqd->tcp_address());
//   REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("orders", "billing") == 3; }));
//   nsqd->stop();    // drops every connection, keeps the messages, as a restarted nsqd would
//   nsqd->resume();  // same port again
//
// Each server runs on an io thread of its own. Every method may be called from any thread; the
// accessors return a consistent snapshot.
//
// What is faithful to nsqd 1.3 (and checked against it byte for byte where it matters): the magic,
// every command with its state rules and error frames (code, text, fatal or not), IDENTIFY with
// feature negotiation (heartbeats, msg_timeout, TLS, snappy, deflate, sample rate, output buffer
// values), AUTH, RDY as a bound on messages in flight, in-flight timeouts and requeues, deferred
// messages, heartbeats and the two-missed-heartbeats disconnect, topic buffering until a channel
// exists, a copy of every message per channel, and ephemeral channels and topics. What differs:
// messages live in memory only (stop() keeps them; destroying the Nsqd loses them), AUTH compares
// a shared secret instead of asking an auth server, output is written at once instead of being
// buffered for output_buffer_timeout, timeouts and deferrals fire when due instead of at nsqd's
// 100 ms queue scans, deferred messages stay deferred across stop()/resume() (nsqd delivers them
// at once after a restart), deliveries to one client pause while 4 MiB wait for it to read, and
// a broker-wide memory bound refuses publishes past it.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
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

/// An in-process nsqd and nsqlookupd for tests, and their test brokers.
namespace polybus::nsq::testing {

namespace detail {
class NsqdServer;
class LookupdServer;
class LookupRegistry;
}  // namespace detail

/// How a test nsqd listens and behaves.
struct POLYBUS_API NsqdOptions {
  /// tcp_host:tcp_port; port 0 picks a free port (kept across stop()/start()).
  std::uint16_t tcp_port = 0;
  std::string tcp_host = "127.0.0.1";  ///< an IP address

  /// nsqd's HTTP API (/ping, /info, /pub, /mpub, /stats, /topic/..., /channel/..., /config/...;
  /// docs/testing.md) on http_host:http_port; nullopt: none, 0: a free port.
  std::optional<std::uint16_t> http_port;
  std::string http_host = "127.0.0.1";  ///< an IP address

  /// What /info and nsqlookupd registrations announce as this nsqd's address; empty: 127.0.0.1
  /// (polybus broker nsqd gives the host name, as nsqd's --broadcast-address defaults to).
  std::string broadcast_address;
  /// The ports announced to nsqlookupd (nsqd's --broadcast-tcp-port, --broadcast-http-port); 0:
  /// the ones listened on.
  std::uint16_t broadcast_tcp_port = 0;
  std::uint16_t broadcast_http_port = 0;  ///< the HTTP port announced; 0: the one listened on
  /// Every nsqlookupd (host:port of its TCP protocol) this nsqd registers its topics and channels
  /// with, as nsqd does: IDENTIFY, a REGISTER for each, REGISTER/UNREGISTER as they come and go,
  /// a PING every lookupd_ping_interval, and a new connection at the next ping after one failed.
  /// GET /config/nsqlookupd_tcp_addresses reports them, and PUT replaces them. Needs http_port.
  std::vector<std::string> lookupd_tcp_addresses;
  std::chrono::milliseconds lookupd_ping_interval{15000};  ///< between PINGs to each nsqlookupd
  /// Told, as a line of text, why a connection to an nsqlookupd failed ("LOOKUPD(host:port):
  /// cannot connect: Connection refused"); polybus broker nsqd writes it to standard error.
  /// Called on the server's io thread.
  std::function<void(const std::string&)> log;
  /// Messages each topic and channel keeps in memory, as nsqd's --mem-queue-size; the rest wait
  /// in its disk queue (0: all of them), except an ephemeral channel's, which are dropped as in
  /// nsqd. Messages also go to disk while bodies in memory pass max_stored_bytes.
  std::int64_t mem_queue_size = 10000;
  /// Where the disk queues' files go, in a folder of this broker's own (polybus-nsqd-XXXXXX)
  /// removed when it stops; empty: the system's temporary folder. Nothing written there by a
  /// real nsqd is read or touched.
  std::string data_path;
  /// The largest disk queue file (nsqd's --max-bytes-per-file); a queue uses as many as it needs.
  std::uint64_t max_bytes_per_file = 100 * 1024 * 1024;
  /// Bytes of messages waiting on disk across the broker; a publish that memory cannot take
  /// and that would pass it fails (E_PUB_FAILED, E_MPUB_FAILED, E_DPUB_FAILED). nsqd has no
  /// such bound: its disk is its limit.
  std::uint64_t max_disk_bytes = 4ULL * 1024 * 1024 * 1024;

  /// Message timeouts: the default a client gets, and (max_msg_timeout) the most it may ask for
  /// in IDENTIFY or reach with TOUCH. nsqd refuses a client msg_timeout below 1000 ms.
  std::chrono::milliseconds msg_timeout{60000};
  /// The most a client may ask for in IDENTIFY or reach with TOUCH.
  std::chrono::milliseconds max_msg_timeout{15 * 60 * 1000};
  /// REQ delays are clamped to it; DPUB beyond it is refused.
  std::chrono::milliseconds max_req_timeout{60 * 60 * 1000};
  /// RDY above it is a fatal E_INVALID.
  std::int64_t max_rdy_count = 2500;
  /// One message body (PUB, DPUB, each of MPUB), and a whole command body (MPUB, IDENTIFY, AUTH).
  std::int64_t max_msg_size = 1024 * 1024;
  std::int64_t max_body_size = 5 * 1024 * 1024;  ///< a whole command body (MPUB, IDENTIFY, AUTH)

  /// Heartbeats for a client that does not ask for an interval (nsqd: --client-timeout / 2), and
  /// the most it may ask for. A client silent for twice its interval is disconnected.
  std::chrono::milliseconds heartbeat_interval{30000};
  std::chrono::milliseconds max_heartbeat_interval{60000};  ///< the most a client may ask for

  /// Output buffering as reported in IDENTIFY (this server writes at once whatever it is told):
  /// the output_buffer_timeout of a client that does not ask for one.
  std::chrono::milliseconds output_buffer_timeout{250};
  std::int64_t max_output_buffer_size = 64 * 1024;  ///< the most output_buffer_size IDENTIFY takes
  /// Reported by /info only: IDENTIFY takes an output_buffer_timeout of 25 ms to 30 s whatever
  /// this is.
  std::chrono::milliseconds max_output_buffer_timeout{30000};

  /// Non-empty: IDENTIFY reports auth_required, and SUB/PUB/MPUB/DPUB need AUTH with this secret.
  std::string auth_secret;
  std::string auth_identity = "polybus-test";  ///< what a successful AUTH answers

  /// Both set (PEM files): IDENTIFY offers tls_v1 and upgrades the connection in band.
  std::string tls_cert_file;
  std::string tls_key_file;  ///< the private key of tls_cert_file (PEM)
  /// nsqd's --tls-client-auth-policy: none, require (any client certificate), require_verify (one
  /// signed by tls_root_ca_file). Either of the last two implies tls_required = yes.
  enum class TlsClientAuth {
    none,           ///< no client certificate asked for
    require,        ///< a client certificate, whoever signed it
    require_verify  ///< a client certificate signed by tls_root_ca_file
  };
  TlsClientAuth tls_client_auth = TlsClientAuth::none;  ///< nsqd's --tls-client-auth-policy
  std::string tls_root_ca_file;  ///< PEM: the CAs client certificates are checked against
  /// nsqd's --tls-required: yes refuses every command but IDENTIFY before the TLS upgrade, and
  /// every HTTP request with 403 TLS_REQUIRED; except_http only the former.
  enum class TlsRequired {
    no,          ///< plain connections may do everything
    yes,         ///< TLS before any command but IDENTIFY; HTTP requests get 403
    except_http  ///< TLS before any command but IDENTIFY; the HTTP API stays open
  };
  TlsRequired tls_required = TlsRequired::no;  ///< nsqd's --tls-required
  /// The oldest TLS version accepted: 0x0301 (TLS 1.0, nsqd's default) to 0x0304 (TLS 1.3).
  int tls_min_version = 0x0301;

  bool snappy = true;         ///< a client may negotiate snappy compression in IDENTIFY
  bool deflate = true;        ///< a client may negotiate deflate compression in IDENTIFY
  int max_deflate_level = 6;  ///< the highest deflate level; a client's higher one is lowered

  /// Longest command line; a longer one closes the connection (nsqd's read buffer is 16 KiB).
  std::size_t max_line_length = 16 * 1024;
  /// Bytes of message bodies the broker holds in memory; beyond it published messages go to the
  /// disk queues (see max_disk_bytes).
  std::size_t max_stored_bytes = 256 * 1024 * 1024;

  /// Entries the journal keeps (Nsqd::journal()): each command a connection sends (a command
  /// with a body once its body came) and each response, error and message it is sent. 0 keeps
  /// none and costs nothing.
  std::size_t journal_capacity = 0;
  /// Non-empty: every journal entry is also written there as a JSON line as it is recorded
  /// (Journal::write_to); the file is as long as the run, whatever journal_capacity keeps (0
  /// here: 100,000).
  std::string journal_file;

  /// Fault rules in force from the start (Nsqd::faults() adds and removes them later). A rule's
  /// unit is a command (IDENTIFY, AUTH, SUB, RDY, FIN, REQ, TOUCH, PUB, MPUB, DPUB, NOP, CLS) or
  /// "message" (a delivery); error answers with the rule's text ("E_FIN_FAILED FIN failed"),
  /// fatal or not; duplicate carries a command out twice and delivers a message twice.
  std::vector<polybus::testing::FaultRule> faults;
  /// Time the test controls (polybus/manual_clock.hpp): message timeouts, REQ delays and
  /// deferred publishes come due only as the test advances it, and TOUCH extends from its time.
  /// Heartbeats, the output buffer's flushes and the lookupd pings stay on the real clock. Null:
  /// the real clock.
  std::shared_ptr<polybus::ManualClock> clock;
  /// Set (0: a free port): an admin HTTP API of the test nsqd's own, on this port of admin_host,
  /// for tests in any language: GET /journal?since=SEQ (JSON lines), POST /faults (a rule's
  /// text form; answers {"id":N}), GET and DELETE /faults/N, DELETE /faults. None of nsqd's
  /// ports or paths change. With it, journal_capacity 0 keeps 100,000.
  std::optional<std::uint16_t> admin_port;
  std::string admin_host = "127.0.0.1";  ///< an IP address
};

class Lookupd;

/// An in-process nsqd on an io thread of its own. Every method may be called from any thread; the
/// accessors return a consistent snapshot, and 0, false or nothing for an unknown topic or
/// channel.
class POLYBUS_API Nsqd {
 public:
  /// Listens on tcp_host:tcp_port (and http_host:http_port with an http_port) and serves until
  /// stop() or destruction. Throws std::system_error when a port cannot be bound,
  /// std::runtime_error when the TLS files cannot be loaded, std::invalid_argument for
  /// lookupd_tcp_addresses without an http_port.
  static std::unique_ptr<Nsqd> start(NsqdOptions options = {});
  ~Nsqd();
  Nsqd(const Nsqd&) = delete;
  Nsqd& operator=(const Nsqd&) = delete;

  /// The TCP port it listens on (the one picked, for tcp_port 0).
  std::uint16_t tcp_port() const;
  std::string tcp_address() const;  ///< "127.0.0.1:<port>"
  /// The HTTP API's port and "127.0.0.1:<port>"; 0 and "" without one.
  std::uint16_t http_port() const;
  std::string http_address() const;  ///< "127.0.0.1:<HTTP port>"; "" without an HTTP API
  /// The options it was started with (tls_required raised to yes by a client-auth policy).
  const NsqdOptions& options() const;

  /// Closes the listener and every connection; topics, channels and their messages stay (messages
  /// in flight go back to their channel, attempts kept), like an nsqd restarting with its disk
  /// queue. Returns once every connection is closed. Idempotent.
  void stop();
  /// Listens again on the same port (named apart from the static start(), which it would clash
  /// with). Throws std::system_error if the port was taken meanwhile.
  void resume();
  /// stop() then resume().
  void restart();
  /// Listening: false between stop() and resume().
  bool running() const;

  /// Registers with an in-process nsqlookupd: every topic and channel, now and later, is announced
  /// with this nsqd's broadcast address and ports (by default 127.0.0.1 and tcp_port()), and
  /// withdrawn while stopped. The Lookupd may be destroyed first.
  void register_with(const Lookupd& lookupd);

  // State, for assertions. An unknown topic or channel has depth 0.
  std::size_t client_count() const;  ///< open TCP connections
  /// Every topic's name, sorted.
  std::vector<std::string> topics() const;
  /// The names of the topic's channels, sorted.
  std::vector<std::string> channels(const std::string& topic) const;
  /// The topic exists.
  bool has_topic(const std::string& topic) const;
  /// The topic and its channel exist.
  bool has_channel(const std::string& topic, const std::string& channel) const;
  /// Messages held by a topic that has no channel yet (or is paused, or is still asking
  /// nsqlookupd for its channels).
  std::uint64_t topic_depth(const std::string& topic) const;
  /// Messages published to a topic since it was created.
  std::uint64_t topic_message_count(const std::string& topic) const;
  /// Messages ready for delivery in a channel (neither in flight nor deferred), as nsqd's depth.
  std::uint64_t channel_depth(const std::string& topic, const std::string& channel) const;
  /// Of a topic's depth, the messages waiting in its disk queue (nsqd's backend_depth): those
  /// beyond mem_queue_size or max_stored_bytes.
  std::uint64_t topic_backend_depth(const std::string& topic) const;
  /// Of a channel's depth, the messages waiting in its disk queue (nsqd's backend_depth).
  std::uint64_t channel_backend_depth(const std::string& topic, const std::string& channel) const;
  /// Bytes of messages waiting in disk queues, against NsqdOptions::max_disk_bytes.
  std::uint64_t disk_bytes() const;
  /// What the connections sent and were sent (NsqdOptions::journal_capacity): kind is the
  /// command (IDENTIFY, AUTH, SUB, RDY, FIN, REQ, TOUCH, PUB, MPUB, DPUB, NOP, CLS, or what an
  /// invalid line began with) or the frame sent (response, error, message), with the
  /// subscription's topic and channel, a message id (FIN, REQ, TOUCH, message), a count (RDY's;
  /// REQ's delay in ms; MPUB's messages; a message's attempts) and body bytes. Safe from any
  /// thread.
  polybus::testing::Journal& journal() const;
  /// The fault rules in force (NsqdOptions::faults): add, remove and count them while it runs.
  polybus::testing::FaultRules& faults() const;
  /// The admin API's port (NsqdOptions::admin_port); 0 without one.
  std::uint16_t admin_port() const;
  /// Messages of the channel delivered and not yet finished, requeued or timed out.
  std::size_t in_flight(const std::string& topic, const std::string& channel) const;
  /// The largest RDY count any client subscribed to the channel has set (since it was created).
  std::int64_t max_ready_count(const std::string& topic, const std::string& channel) const;
  /// The RDY counts the clients subscribed to the channel have set now, summed.
  std::int64_t ready_count(const std::string& topic, const std::string& channel) const;
  /// Messages of the channel waiting for their time: a DPUB's, or requeued with a delay.
  std::size_t deferred(const std::string& topic, const std::string& channel) const;
  /// Clients subscribed to the channel.
  std::size_t subscriber_count(const std::string& topic, const std::string& channel) const;
  /// Timeouts that sent an in-flight message back to its channel, per channel.
  std::uint64_t timeout_count(const std::string& topic, const std::string& channel) const;
  /// REQs the channel took.
  std::uint64_t requeue_count(const std::string& topic, const std::string& channel) const;
  /// Every RDY count the channel's subscribers set, oldest first (the last 1024).
  std::vector<std::int64_t> ready_counts_set(const std::string& topic,
                                             const std::string& channel) const;
  /// The delay of each REQ the channel took, as nsqd clamped it, oldest first (the last 1024).
  std::vector<std::chrono::milliseconds> requeue_delays(const std::string& topic,
                                                        const std::string& channel) const;

  /// Everything above in the terms every test broker uses (docs/metrics.md): connections, bytes,
  /// per topic and channel.
  metrics::BrokerMetrics metrics() const;

  /// Waits until `condition` holds, re-checking whenever the broker's state changes (a command, a
  /// connection opening or closing, a timeout), never by sleeping. False if `bound` passes first.
  /// `condition` runs on the calling thread and may call the accessors above.
  bool wait_until(const std::function<bool()>& condition,
                  std::chrono::milliseconds bound = std::chrono::seconds(20)) const;

 private:
  explicit Nsqd(NsqdOptions options);
  std::unique_ptr<detail::NsqdServer> server_;
};

/// How a test nsqlookupd listens, and its timings (nsqlookupd's defaults).
struct POLYBUS_API LookupdOptions {
  /// nsqlookupd's HTTP API on http_host:http_port (0: a free port).
  std::string http_host = "127.0.0.1";
  std::uint16_t http_port = 0;  ///< the HTTP API's port; 0: a free port
  /// nsqlookupd's TCP protocol (nsqd registering) on tcp_host:tcp_port; nullopt: none, 0: free.
  std::optional<std::uint16_t> tcp_port;
  std::string tcp_host = "127.0.0.1";  ///< an IP address
  /// What IDENTIFY answers as this nsqlookupd's address; empty: the host name.
  std::string broadcast_address;
  /// A producer registered over TCP that has not sent PING for this long is left out of /lookup
  /// and /nodes; a tombstoned producer is left out of /lookup for tombstone_lifetime.
  std::chrono::milliseconds inactive_producer_timeout{300000};
  std::chrono::milliseconds tombstone_lifetime{45000};  ///< a tombstone's time out of /lookup
  /// Entries the journal keeps (Lookupd::journal()); 0: it records nothing.
  std::size_t journal_capacity = 0;
  /// Fault rules in force from the start (Lookupd::faults()): the unit is an HTTP path
  /// ("/lookup", "/nodes"...), with the topic and channel of its query.
  std::vector<polybus::testing::FaultRule> faults;
  /// Time the test controls: a tombstone's lifetime runs on it. PINGs and
  /// inactive_producer_timeout stay on the real clock (liveness). Null: the real clock.
  std::shared_ptr<polybus::ManualClock> clock;
};

/// An nsqlookupd: its HTTP API (/ping, /info, /lookup, /topics, /channels, /nodes,
/// /topic/create|delete|tombstone, /channel/create|delete) over HTTP/1.1 with keep-alive, and,
/// when asked, its TCP protocol, through which a real or in-process nsqd registers.
class POLYBUS_API Lookupd {
 public:
  /// Listens on 127.0.0.1:http_port; 0 picks a free port. Throws std::system_error if the port
  /// cannot be bound.
  static std::unique_ptr<Lookupd> start(std::uint16_t http_port = 0);
  /// Listens on http_host:http_port, and on tcp_host:tcp_port with a tcp_port. Throws
  /// std::system_error if a port cannot be bound.
  static std::unique_ptr<Lookupd> start(LookupdOptions options);
  ~Lookupd();
  Lookupd(const Lookupd&) = delete;
  Lookupd& operator=(const Lookupd&) = delete;

  /// The HTTP API's port (the one picked, for 0).
  std::uint16_t http_port() const;
  std::string http_address() const;  ///< "127.0.0.1:<port>"
  /// The TCP protocol's port and "127.0.0.1:<port>"; 0 and "" without it.
  std::uint16_t tcp_port() const;
  std::string tcp_address() const;  ///< "127.0.0.1:<TCP port>"; "" without the TCP protocol

  /// Producers announced by hand (an nsqd registered with register_with() does this by itself).
  /// Adding makes the topic known; removing the last producer keeps it known with none, as
  /// nsqlookupd does (except for `#ephemeral` topics, which it forgets).
  void add_producer(const std::string& topic, const std::string& broadcast_address,
                    std::uint16_t tcp_port, std::uint16_t http_port = 0);
  /// Withdraws the producer add_producer() announced for the topic (and its channels), and from
  /// /nodes once no topic lists it.
  void remove_producer(const std::string& topic, const std::string& broadcast_address,
                       std::uint16_t tcp_port);
  /// Forgets the topic: /lookup answers 404 TOPIC_NOT_FOUND again.
  void remove_topic(const std::string& topic);

  /// true: answer in the pre-1.0 form {"status_code":200,"status_txt":"OK","data":{...}}.
  void set_wrapped(bool wrapped);

  /// Requests answered so far on /lookup.
  std::uint64_t lookup_count() const;
  /// The HTTP requests and their answers (LookupdOptions::journal_capacity): kind is the path or
  /// "response", text the method and query, count an answer's status, with the topic and
  /// channel of the query; connection is the HTTP connection's number.
  polybus::testing::Journal& journal() const;
  /// The fault rules applied to HTTP requests (LookupdOptions::faults).
  polybus::testing::FaultRules& faults() const;

 private:
  explicit Lookupd(LookupdOptions options);
  friend class Nsqd;
  std::shared_ptr<detail::LookupRegistry> registry_;
  std::unique_ptr<detail::LookupdServer> server_;
};

/// Registers the "nsq" (one nsqd) and "nsq+lookupd" (a lookupd and one nsqd registered with it)
/// test brokers with polybus::testing. Idempotent.
POLYBUS_API void register_test_brokers();

}  // namespace polybus::nsq::testing
