// SPDX-License-Identifier: Apache-2.0
// A link over one TCP connection (the core's Transport) speaking a Wire: raw TCP or WebSocket.
#pragma once

#include <asio/steady_timer.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "link.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/io/transport.hpp"
#include "wire.hpp"

namespace polybus::quickio::detail {

class StreamLink : public Link,
                   public WireHandler,
                   public std::enable_shared_from_this<StreamLink> {
 public:
  // handshake_timeout: from TCP up to the server's /qio/ohai.
  StreamLink(const Strand& strand, TransportSettings settings, HostPort target,
             std::chrono::milliseconds handshake_timeout, LinkHandler& handler,
             const AdapterContext* stats);
  ~StreamLink() override;
  // The wire is made once the link exists (it reports to the link).
  void set_wire(std::unique_ptr<Wire> wire) { wire_ = std::move(wire); }

  void start() override;
  void send(std::string_view event, WrittenFn written) override;
  void close() override;
  void fail(std::error_code ec, const std::string& detail) override;
  std::string endpoint() const override { return target_.to_string(); }
  std::size_t unsent_bytes() const override { return transport_ ? transport_->queued_bytes() : 0; }
  bool write_room() override { return transport_ && transport_->write_room(); }

  void on_wire_open() override;
  void on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) override;

 private:
  void flush();
  void on_data(const std::shared_ptr<ReadChunk>& chunk, const char* data, std::size_t size);
  void on_closed(std::error_code ec, const std::string& detail);
  void on_written(std::uint64_t total_written);
  void fail_unwritten(std::error_code ec);

  Strand strand_;
  TransportSettings settings_;
  HostPort target_;
  std::chrono::milliseconds handshake_timeout_;
  LinkHandler& handler_;
  std::optional<AdapterContext> stats_;
  std::unique_ptr<Wire> wire_;
  std::shared_ptr<Transport> transport_;
  asio::steady_timer handshake_timer_;
  bool tcp_up_ = false;
  bool ended_ = false;
  std::error_code end_reason_;  // why the link ended
  std::uint64_t events_ = 0;    // events received, so a read knows whether it completed one
  // Sends waiting for the socket: the transport's total_queued() after each, in order.
  Fifo<std::pair<std::uint64_t, WrittenFn>> unwritten_;
};

}  // namespace polybus::quickio::detail
