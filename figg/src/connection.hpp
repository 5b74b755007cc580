// SPDX-License-Identifier: Apache-2.0
// Figg's binding: one Machine on core's Transport, reconnecting forever through core's
// ReconnectLoop. It keeps what the machine does not: the completions of the publishes in the
// window and of those waiting for room (up to their deadline), the subscription sinks, and the
// PING liveness rule.
#pragma once

#include <asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "machine.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/io/reconnect.hpp"
#include "polybus/io/transport.hpp"

namespace polybus::figg {

class Connection : public MachineHandler, public std::enable_shared_from_this<Connection> {
 public:
  Connection(const AdapterContext& context, HostPort endpoint);
  ~Connection() override;

  void start();
  void publish(PublishWork&& work);
  // One subscription per topic: errc::already_subscribed for a second one.
  std::error_code attach(const std::string& topic, std::optional<std::uint64_t> from,
                         std::shared_ptr<SubscriptionSink> sink);
  void detach(const std::string& topic);
  // No flow control in Figg: pausing detaches and remembers the offset to resume from.
  void pause(const std::string& topic);
  void resume(const std::string& topic);
  // Budget back-pressure: reading stops while any subscription holds.
  void hold(bool on);
  void ping(OpCompletion done);
  void close(std::function<void()> done);

  // MachineHandler
  void send(std::string bytes) override;
  void send(std::shared_ptr<const std::string> payload) override;
  void send_copy(std::string_view bytes) override;
  bool write_room() override { return transport_ && transport_->write_room(); }
  void on_acked(std::size_t count) override;
  void on_data(const std::string& topic, std::uint64_t offset, std::string_view data,
               const std::shared_ptr<const void>& owner) override;
  void on_attached(const std::string& topic, std::uint64_t offset) override;
  void on_log_reset(const std::string& topic, std::uint64_t resume_from,
                    std::uint64_t log_end) override;
  void on_pong(std::uint64_t timestamp) override;
  void on_failure(std::error_code ec, const std::string& detail) override;

 private:
  struct SinkEntry {
    std::shared_ptr<SubscriptionSink> sink;
    std::shared_ptr<const std::string> topic;  // shared with each message
    bool confirmed = false;
    bool paused = false;
    std::optional<std::uint64_t> resume_from;
  };

  void send_to_window(PublishWork& work);
  void release_waiting();
  // Says how many publishes wait unsent (for room in the window, or unwritten in it) to the
  // metrics.
  void count_waiting();
  void connect();
  void on_connected();
  void on_closed(std::error_code ec, const std::string& detail);
  void arm_ping();

  AdapterContext ctx_;
  HostPort endpoint_;
  TransportSettings settings_;
  Machine machine_;
  ReconnectLoop reconnect_;
  std::chrono::milliseconds ping_interval_;
  asio::steady_timer ping_timer_;
  std::shared_ptr<Transport> transport_;
  Fifo<OpCompletion> in_window_;  // the window's publishes, oldest first
  Fifo<PublishWork> waiting_;     // no room in the window yet
  std::map<std::string, SinkEntry, std::less<>> sinks_;
  // The last DATA frame's sink; sinks_.end() once a sink is erased (detach, close).
  std::map<std::string, SinkEntry, std::less<>>::iterator last_sink_ = sinks_.end();
  std::deque<std::pair<std::uint64_t, OpCompletion>> pings_;
  std::uint64_t ping_counter_ = 0;
  bool server_pongs_ = false;
  int missed_pongs_ = 0;
  bool closed_ = false;
  int holds_ = 0;  // subscriptions holding the inflow (hold())
};

}  // namespace polybus::figg
