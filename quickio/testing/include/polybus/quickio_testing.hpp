// SPDX-License-Identifier: Apache-2.0
// An in-process QuickIO 0.2.1 server for tests and benchmarks (docs/quickio.md): one
// port for raw TCP, WebSocket and HTTP long polling, told apart by their first bytes; the
// built-in events (/qio/on, /qio/off, /qio/ping, /qio/hostname, /qio/callback/N); heartbeats,
// challenges and server callbacks as the real server; and polybus's pub/sub convention: an event
// without a callback id goes to every subscriber of its exact path, one with a callback id is a
// request relayed to one subscriber (round robin) whose answer goes back to the requester.
//
//   auto server = polybus::quickio::testing::Server::launch();
//   auto client = polybus::connect("quickio://" + server->address());
//
// With ServerOptions::tls_cert_file and tls_key_file, clients connect with "?tls=true".
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/metrics.hpp"

/// An in-process QuickIO server for tests, and its test brokers.
namespace polybus::quickio::testing {

/// How a test QuickIO server listens and behaves.
struct POLYBUS_API ServerOptions {
  /// Listens on 127.0.0.1:port; 0 picks a free port (kept across stop()/start()).
  std::uint16_t port = 0;
  /// /qio/heartbeat:0=null after this long without outgoing traffic (raw, WebSocket).
  std::chrono::milliseconds heartbeat_interval{55000};
  /// A raw or WebSocket client silent this long gets `/qio/heartbeat:<server cb>=null` ...
  std::chrono::milliseconds challenge_after{std::chrono::minutes(15)};
  /// ... and is closed when it has not answered it after this long.
  std::chrono::milliseconds challenge_timeout{std::chrono::seconds(60)};
  /// A held long poll with nothing to say is answered empty after this long; a session without
  /// any POST for twice this long is dropped.
  std::chrono::milliseconds http_poll_timeout{std::chrono::seconds(50)};
  /// A request relayed to a subscriber (a server callback) that is not answered within this is
  /// answered 500 "callback expired".
  std::chrono::milliseconds callback_expiry{std::chrono::seconds(15)};
  /// Server callbacks outstanding per client, as the real server; further requests wait.
  std::size_t max_pending_server_callbacks = 4;
  /// Bytes of the largest event a raw or WebSocket client may send; a bigger one closes it.
  std::size_t max_event_size = 1 << 20;
  std::size_t max_subscriptions = 1024;  ///< per client; over it /qio/on answers 420
  bool refuse_websocket = false;         ///< upgrades answered 400 (the client's HTTP fallback)
  std::string public_hostname;           ///< /qio/hostname answer; empty: "127.0.0.1:<port>"
  /// PEM files: with both, every connection is TLS from its first byte (raw, WebSocket and HTTP
  /// alike), and one whose TLS handshake fails is closed.
  std::string tls_cert_file;
  std::string tls_key_file;  ///< the private key of tls_cert_file (PEM)

  /// Entries the journal keeps (Server::journal()): each event a client sends and each it is
  /// sent, the connection being the client (an HTTP session is one, whatever carries its POSTs).
  /// `kind` is the event's path ("/qio/on", "/orders"), "/qio/callback" for a callback either
  /// way (`id` its callback id, `text` its code and err_msg); `id` is otherwise the event's
  /// callback id (a server callback id on a request relayed to a subscriber), `topic` the path
  /// /qio/on and /qio/off name or the path of an application event, `bytes` the JSON data's.
  /// 0 keeps none and costs nothing.
  std::size_t journal_capacity = 0;
  /// Fault rules in force from the start (Server::faults() changes them later). A rule's unit is
  /// the path of an event a client sends: a built-in one ("/qio/on", "/qio/off", "/qio/ping",
  /// "/qio/hostname", "/qio/heartbeat"), "/qio/callback" (a subscriber's answer to a relayed
  /// request), or an application path ("/orders": a publish, or a request when it asks for a
  /// callback). `error` answers the event's callback with `{"code":N,"data":null,"err_msg":M}`,
  /// N and M from the rule's text "N M" (N is 500 when the text starts with no number). An
  /// event without a callback id cannot be answered: `error` closes the connection instead, as
  /// the real server does with an event it cannot take. `swallow` ignores the event (its
  /// callback, if asked, is never answered). `delay` holds what the client is sent,
  /// HTTP long polls included (a poll due meanwhile is answered empty). `close` ends a raw
  /// client with a FIN, a WebSocket one with a close frame and an HTTP session (its next POST
  /// gets 403); `reset` sends a TCP RST (HTTP: on the connection of its held poll) and ends the
  /// session. `duplicate` carries the event out twice: a publish delivered twice to each
  /// subscriber, a request relayed twice.
  std::vector<polybus::testing::FaultRule> faults;
  /// Time the test controls (polybus/manual_clock.hpp): a server callback's expiry
  /// (callback_expiry) comes due only as the test advances it. Heartbeats, challenges and HTTP
  /// polls stay on the real clock. Null: the real clock.
  std::shared_ptr<polybus::ManualClock> clock;
};

class ServerImpl;

/// A QuickIO server on an io thread of its own. Every method may be called from any thread.
class POLYBUS_API Server {
 public:
  /// Listens at once. Throws std::system_error when the port cannot be bound,
  /// std::runtime_error when the TLS files cannot be loaded.
  static std::unique_ptr<Server> launch(ServerOptions options = {});
  /// Made by launch(); the implementation is internal.
  explicit Server(std::unique_ptr<ServerImpl> impl);
  /// Closes the listener, every connection and every HTTP session.
  ~Server();

  /// The port it listens on (the one picked, for port 0).
  std::uint16_t port() const;
  /// "127.0.0.1:port", for a URL.
  std::string address() const;
  /// stop() closes the listener, every connection and every HTTP session; start() listens again
  /// on the same port.
  void stop();
  /// Listens again after stop(), on the same port; nothing while it listens. Throws
  /// std::system_error if the port cannot be bound.
  void start();

  /// Clients: raw and WebSocket connections past their handshake, and open HTTP sessions.
  std::size_t connections() const;
  /// Raw TCP clients past their handshake.
  std::size_t raw_connections() const;
  /// WebSocket clients past their handshake.
  std::size_t websocket_connections() const;
  /// Open HTTP long-polling sessions.
  std::size_t http_sessions() const;
  /// Clients subscribed to exactly `path`.
  std::size_t subscribers(const std::string& path) const;
  /// Connections, bytes, and per path the events published and delivered, the requests relayed
  /// and answered (docs/metrics.md).
  metrics::BrokerMetrics metrics() const;

  /// /qio/move:0="<address>" to every client, then each is closed. An HTTP session without a
  /// held poll (its client pausing between polls) ends when its next POST has collected the move.
  void move_all(const std::string& address);
  /// Silent: nothing is written any more (no heartbeats, events, answers or polls) and
  /// connections stay open; the client's heartbeat timeout is what ends them.
  void set_silent(bool silent);
  /// Sends `<path>:0=<json>` to every subscriber of path, as a server application would.
  void broadcast(const std::string& path, const std::string& json);
  /// What the clients sent and were sent (ServerOptions::journal_capacity).
  polybus::testing::Journal& journal() const;
  /// The fault rules in force (ServerOptions::faults).
  polybus::testing::FaultRules& faults() const;

 private:
  std::unique_ptr<ServerImpl> impl_;
};

/// Registers "quickio", "quickio+ws" and "quickio+http" with polybus::testing.
POLYBUS_API void register_test_brokers();

}  // namespace polybus::quickio::testing
