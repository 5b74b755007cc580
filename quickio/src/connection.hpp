// SPDX-License-Identifier: Apache-2.0
// The client's I/O side, the binding of QuickIO's machine (machine.hpp, the session) to the
// wire: a succession of links (raw TCP, WebSocket or HTTP long polling), with reconnect and
// backoff, the WebSocket-to-HTTP fallback, the heartbeat rule and /qio/move. Everything runs on
// one strand; the native Client and the polybus adapter both sit on top of it.
#pragma once

#include <asio/steady_timer.hpp>
#include <atomic>
#include <functional>
#include <optional>

#include "link.hpp"
#include "machine.hpp"
#include "polybus/io/reconnect.hpp"
#include "polybus/io/transport.hpp"

namespace polybus::quickio::detail {

enum class Carrier { raw, websocket, http };

struct ConnectionSettings {
  Carrier carrier = Carrier::raw;
  HostPort address;
  std::string path;  // WebSocket and HTTP request path
  std::chrono::milliseconds heartbeat_timeout{65000};
  std::chrono::milliseconds http_poll_delay_max{2000};
  bool http_fallback = true;  // quickio+ws: HTTP long polling when the upgrade is refused
  std::chrono::milliseconds http_request_timeout{60000};
  std::chrono::milliseconds handshake_timeout{5000};
  std::size_t max_queued_bytes = 8 * 1024 * 1024;
  std::size_t max_frame_size = 16 * 1024 * 1024;
  std::uint32_t max_redirects = 10;  // /qio/move in a row before they are refused
  std::size_t max_json_depth = kDefaultMaxJsonDepth;
  TransportSettings transport;

  // From a quickio, quickio+ws or quickio+http URL and the resolved options. Throws
  // polybus::Error(errc::invalid_url) for a URL it cannot use.
  static ConnectionSettings from(const Url& url, const ResolvedOptions& options);
};

struct ConnectionHooks {
  std::function<void(ConnectionState, const std::string& endpoint, std::error_code,
                     const std::string& detail, std::chrono::milliseconds retry_in)>
      state;
  std::function<void(std::error_code, const std::string&)> error;
  std::function<void(LogLevel, std::string_view)> log;
  std::function<void(const std::string& path, int code, const std::string& err_msg)>
      subscription_refused;
};

class Connection : public LinkHandler,
                   public MachineHandler,
                   public std::enable_shared_from_this<Connection> {
 public:
  Connection(const Strand& strand, ConnectionSettings settings, Backoff backoff,
             ConnectionHooks hooks, const AdapterContext* stats = nullptr);
  ~Connection() override;

  void start();
  // The machine (the session): what it sends goes to the open link at once.
  Machine& machine() { return machine_; }
  void reconnect();
  void close();
  bool closed() const { return closed_; }
  const Strand& strand() const { return strand_; }

  // Readable from any thread: the open connection's number (0 while none is open), and the
  // bytes queued while disconnected.
  std::uint64_t open_connection() const { return open_connection_.load(); }
  std::size_t queued_bytes() const { return queued_bytes_.load(); }
  std::size_t max_queued_bytes() const { return settings_.max_queued_bytes; }
  Carrier current_carrier() const { return current_carrier_; }
  const HostPort& address() const { return address_; }
  // How the last link ended (its endpoint and cause), for what was lost with it.
  const std::string& last_end() const { return last_end_; }

  // LinkHandler
  void on_link_open(Link* link) override;
  void on_link_event(Link* link, std::string_view text,
                     const std::shared_ptr<const void>& owner) override;
  void on_link_activity(Link* link) override;
  void on_link_write_room(Link* link) override;
  void on_link_closed(Link* link, std::error_code ec, const std::string& detail,
                      bool refused) override;
  // MachineHandler
  void send(std::string_view text, SentFn sent, ExpiredFn expired) override;
  void queue_changed() override { update_counters(); }
  void move_to(const std::string& address) override;
  void subscription_refused(const std::string& path, int code, const std::string& err_msg) override;
  std::size_t unsent_bytes() const override { return link_ ? link_->unsent_bytes() : 0; }
  bool write_room() override { return link_ && link_->write_room(); }

 private:
  void connect();
  void retire_link();
  void arm_heartbeat();
  void state(ConnectionState s, std::error_code reason = {}, const std::string& detail = {},
             std::chrono::milliseconds retry_in = std::chrono::milliseconds(0));
  void log(LogLevel level, const std::string& text);
  void update_counters();
  // A link that ended inside send() (its write over max_write_buffer): dealt with once the
  // machine's call that sent has returned, not in the middle of it.
  bool in_send_ = false;

  Strand strand_;
  ConnectionSettings settings_;
  ConnectionHooks hooks_;
  std::optional<AdapterContext> stats_;
  Machine machine_;
  ReconnectLoop reconnect_;
  asio::steady_timer heartbeat_timer_;
  std::shared_ptr<Link> link_;
  HostPort address_;
  std::string last_end_;
  Carrier current_carrier_ = Carrier::raw;
  bool link_open_ = false;
  bool use_http_ = false;  // quickio+ws: the WebSocket handshake was refused; this attempt is HTTP
  bool moving_ = false;
  // /qio/move in a row: only the first is followed at once, later ones back off, and past
  // max_redirects they are refused. A link that delivers anything but a move ends the row.
  std::uint32_t redirects_ = 0;
  bool closed_ = false;
  Clock::time_point last_activity_;
  std::atomic<std::uint64_t> open_connection_{0};
  std::atomic<std::size_t> queued_bytes_{0};
};

}  // namespace polybus::quickio::detail
