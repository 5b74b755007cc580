// SPDX-License-Identifier: Apache-2.0
// The server's insides: ServerImpl routes events between Peers (one per QuickIO client: a raw or
// WebSocket Connection past its handshake, or an HttpSession) on one io_context thread.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "polybus/adapter/clock_timer.hpp"
#include "polybus/fault_rules.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/journal.hpp"
#include "polybus/metrics.hpp"
#include "polybus/metrics/counters_by_name.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/quickio_testing.hpp"
#include "websocket_endpoint.hpp"

namespace polybus::quickio::testing {

using Clock = std::chrono::steady_clock;
class ServerImpl;
class Connection;

// A client that does not read is dropped when this much is queued for it.
inline constexpr std::size_t kMaxQueuedBytes = 64u << 20;
// Requests waiting for a free server-callback slot of one serving client.
inline constexpr std::size_t kMaxWaitingRequests = 1024;

// One QuickIO client, whatever carries it.
class Peer {
 public:
  enum class Kind { raw, websocket, http };
  Peer(ServerImpl& server, Kind kind);
  virtual ~Peer() = default;
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Queues one event's text for the client.
  virtual void write_event(std::string_view text) = 0;
  // Ends the client (its transport closes); ServerImpl::peer_gone follows at once.
  virtual void close_transport() = 0;
  // A reset fault: as close_transport(), with a TCP RST.
  virtual void reset_transport() = 0;
  // A delay fault: nothing is written to the client until `delay` has passed.
  virtual void hold_output(std::chrono::milliseconds delay) = 0;

  // A request relayed to this client, as the server callback it answers.
  struct Relay {
    std::uint64_t requester = 0;  // peer id
    std::uint64_t requester_callback = 0;
  };
  struct Slot {
    bool busy = false;
    std::uint16_t seq = 0;
    Relay relay;
    std::string path;  // the request's, for metrics
    Clock::time_point expires;
  };
  struct Waiting {
    std::string path;
    std::string json;
    Relay relay;
  };

  ServerImpl& server;
  const std::uint64_t id;
  const Kind kind;
  std::set<std::string> subscriptions;
  std::vector<Slot> slots;  // max_pending_server_callbacks of them; index = id >> 16
  std::deque<Waiting> waiting;
  std::uint16_t challenge_seq = 0;
  std::uint64_t challenge_id = 0;  // 0: none outstanding
  Clock::time_point challenge_deadline;
  Clock::time_point last_sent;
  Clock::time_point last_received;
  bool fault_ending = false;  // a fault ends it: what it sends meanwhile is not carried out
};

// The path a /qio/on or /qio/off names ("/path" or ["/path", extra]), or nullopt.
std::optional<std::string> subscription_path(std::string_view json);

class HttpSession;

class ServerImpl {
 public:
  explicit ServerImpl(ServerOptions options);
  ~ServerImpl();

  // Runs fn on the io thread and waits for its result.
  template <typename Fn>
  auto run(Fn fn) -> decltype(fn()) {
    return io_.run(std::move(fn));
  }

  void listen(std::uint16_t port);
  void close_all();

  // ---- routing (io thread) ----
  void add_peer(Peer& peer);
  void peer_gone(Peer& peer);  // once per peer, when its transport ends
  // One event text from peer; false when it is malformed (the caller then ends the peer).
  bool handle_event(Peer& peer, std::string_view text);
  void send(Peer& peer, std::string_view path, std::uint64_t callback_id, std::string_view json);
  void answer(Peer& peer, std::uint64_t callback_id, int code, std::string_view data_json,
              std::string_view err_msg = {});
  void broadcast(std::string_view path, std::string_view json);
  void move_all(const std::string& address);
  std::string public_address() const;
  std::size_t count(Peer::Kind kind) const;
  std::size_t subscribers(const std::string& path) const;
  metrics::BrokerMetrics metrics() const;

  // ---- HTTP sessions (io thread) ----
  HttpSession* find_session(const std::string& sid);
  HttpSession& open_session(const std::string& sid);
  void end_session(HttpSession& session);

  // ---- connections ----
  void forget(Connection* connection) { connections_.erase(connection); }

  ServerOptions options_;
  polybus::testing::Journal journal_{options_.journal_capacity};
  polybus::testing::FaultRules faults_;
  std::shared_ptr<asio::ssl::context> tls_context_;  // null: plain TCP
  WebSocketEndpoint websocket_;  // before io_: connections still queued in io_ use it
  IoThread io_;                  // before everything that uses its io_context: destroyed after them
  asio::ip::tcp::acceptor acceptor_;
  PortHold port_hold_{io_.context()};  // the port, while stopped
  asio::steady_timer tick_timer_;
  // Callback expiry on ServerOptions::clock, when there is one: due as the test advances it.
  std::unique_ptr<ClockTimer> callback_timer_;
  std::optional<Clock::time_point> callback_armed_;  // the expiry its pending wait is for
  std::uint16_t port_ = 0;
  bool silent_ = false;
  bool stopping_ = false;
  std::chrono::milliseconds tick_interval_;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;
  std::uint64_t accepted_ = 0;  // TCP connections (HTTP long polling opens several per client)
  std::uint64_t bytes_received_ = 0;
  std::uint64_t bytes_sent_ = 0;

 private:
  // What went through a path, for metrics.
  struct PathCounters {
    std::uint64_t published = 0;  // events and requests from clients
    std::uint64_t delivered = 0;  // events and requests written to subscribers
    std::uint64_t answered = 0;   // requests whose subscriber answered
  };
  PathCounters& counters(std::string_view path) { return path_counters_[path]; }

  struct PathSubscribers {
    std::vector<Peer*> peers;
    std::size_t next = 0;  // round robin for requests
  };

  void accept();
  void schedule_tick();
  // What an event asks for, carried out.
  void route(Peer& peer, const Event& event);
  // The journal's entry for the event, then the fault rule that fires for it, if any.
  void route_with_faults(Peer& peer, const Event& event);
  // A close or reset fault: ends the peer from the io thread's queue, as its caller may still be
  // reading its events (an HTTP POST's body, the rest of a raw read).
  void end_later(Peer& peer, bool reset);
  void check_peer(Peer& peer, Clock::time_point now);
  // The time of callback expiry: ServerOptions::clock's, or the real one.
  Clock::time_point callback_now() const {
    return options_.clock ? options_.clock->now() : Clock::now();
  }
  // Answers the peer's expired server callbacks with 500 "callback expired".
  void expire_callbacks(Peer& peer);
  // With a clock: waits for the earliest busy callback's expiry.
  void arm_callback_timer();
  void tick();
  void handle_builtin(Peer& peer, std::string_view path, std::uint64_t callback_id,
                      std::string_view json);
  void subscribe(Peer& peer, std::uint64_t callback_id, std::string_view json);
  void request(Peer& peer, std::string_view path, std::uint64_t callback_id, std::string_view json);
  void deliver_request(Peer& server, Peer::Waiting request);
  void server_callback_answered(Peer& peer, std::uint64_t id, std::string_view json);
  void relay_answer(const Peer::Relay& relay, int code, std::string_view data_json,
                    std::string_view err_msg);
  void pump_waiting(Peer& peer);
  void unsubscribe(Peer& peer, const std::string& path);

  std::uint64_t next_peer_id_ = 1;
  std::unordered_map<std::uint64_t, Peer*> peers_;
  std::unordered_map<std::string, PathSubscribers> paths_;
  CountersByName<PathCounters> path_counters_;
  std::unordered_map<std::string, std::unique_ptr<HttpSession>> sessions_;
  friend class Peer;
};

}  // namespace polybus::quickio::testing
