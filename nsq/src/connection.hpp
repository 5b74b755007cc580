// SPDX-License-Identifier: Apache-2.0
// One TCP connection to one nsqd: the sans-IO Machine bound to the core's Transport. Producers
// and consumers own these and decide about reconnecting; a connection reports its end once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "machine.hpp"
#include "polybus/io/transport.hpp"

namespace polybus::nsq {

class Connection : public MachineHandler, public std::enable_shared_from_this<Connection> {
 public:
  struct Events {
    std::function<void()> on_ready;
    std::function<void(const MessageView&, const std::shared_ptr<const void>& owner)> on_message;
    std::function<void(std::string_view body)> on_response;
    std::function<void(const ServerError&)> on_server_error;
    std::function<void()> on_heartbeat;   // optional
    std::function<void()> on_write_room;  // optional: see write_room()
    std::function<void(std::error_code, const std::string& detail)> on_closed;  // once per connect
  };

  static std::shared_ptr<Connection> create(std::shared_ptr<const AdapterContext> context,
                                            HostPort target, MachineConfig config,
                                            TransportSettings transport,
                                            std::chrono::milliseconds read_timeout, Events events);
  Connection(std::shared_ptr<const AdapterContext> context, HostPort target, MachineConfig config,
             TransportSettings transport, std::chrono::milliseconds read_timeout, Events events);
  ~Connection() override;

  void connect();
  void close();              // no on_closed; what is queued is dropped
  void close_after_flush();  // sends what is queued (FINs, CLS), then closes; no on_closed
  // Ends the connection with an error, reported through on_closed.
  void fail(std::error_code ec, const std::string& detail);

  // Commands go through the machine, which writes them to the socket at once.
  Machine& machine() { return *machine_; }

  bool ready() const { return ready_; }
  // Room to write more publishes (Transport::write_room); a "no" is followed by on_write_room.
  bool write_room() { return transport_ && transport_->write_room(); }
  bool connecting() const { return connecting_; }
  const HostPort& target() const { return target_; }
  const std::string& endpoint() const { return endpoint_; }
  std::uint64_t generation() const { return generation_; }

  // MachineHandler
  void send(std::string bytes) override;
  void send(std::shared_ptr<const std::string> body) override;
  void send_copy(std::string_view bytes) override;
  void on_start_tls() override;
  void on_ready(const IdentifyResponse& negotiated) override;
  void on_message(const MessageView& message, const std::shared_ptr<const void>& owner) override;
  void on_response(std::string_view body) override;
  void on_server_error(const ServerError& error) override;
  void on_heartbeat() override;
  bool heartbeat_answer_unsent() const override;
  void sent_heartbeat_answer() override;
  void on_failure(std::error_code ec, const std::string& detail) override;

 private:
  void closed(std::error_code ec, const std::string& detail);
  // Runs write(transport) with writing_ set, while this attempt is live.
  template <class Write>
  void write_while_live(Write&& write);

  std::shared_ptr<const AdapterContext> context_;
  HostPort target_;
  std::string endpoint_;
  MachineConfig config_;
  TransportSettings transport_settings_;
  std::chrono::milliseconds read_timeout_;
  Events events_;
  std::shared_ptr<Transport> transport_;
  std::unique_ptr<Machine> machine_;
  std::uint64_t generation_ = 0;
  std::uint64_t heartbeat_answer_mark_ =
      0;  // total_queued() after the last NOP: written once reached
  bool connecting_ = false;
  bool ready_ = false;
  // A write is under way (send*): a connection it ends (over max_write_buffer) is reported after
  // the write returns, not under it. The machine's caller (the producer, in the middle of a
  // publish) still reads what it passed, which its on_closed would move away.
  bool writing_ = false;
};

}  // namespace polybus::nsq
