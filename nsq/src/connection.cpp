// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <asio/post.hpp>
#include <utility>

#include "polybus/error.hpp"

namespace polybus::nsq {

std::shared_ptr<Connection> Connection::create(std::shared_ptr<const AdapterContext> context,
                                               HostPort target, MachineConfig config,
                                               TransportSettings transport,
                                               std::chrono::milliseconds read_timeout,
                                               Events events) {
  return std::make_shared<Connection>(std::move(context), std::move(target), std::move(config),
                                      std::move(transport), read_timeout, std::move(events));
}

Connection::Connection(std::shared_ptr<const AdapterContext> context, HostPort target,
                       MachineConfig config, TransportSettings transport,
                       std::chrono::milliseconds read_timeout, Events events)
    : context_(std::move(context)),
      target_(std::move(target)),
      endpoint_(target_.to_string()),
      config_(std::move(config)),
      transport_settings_(std::move(transport)),
      read_timeout_(read_timeout),
      events_(std::move(events)) {
  // NSQ negotiates TLS inside the protocol (IDENTIFY tls_v1), so the socket starts plain.
  transport_settings_.tls.enabled = false;
  transport_settings_.protocol = "NSQ";
}

Connection::~Connection() {
  if (transport_) transport_->close_after_flush();
}

void Connection::connect() {
  if (transport_) transport_->close();
  ++generation_;
  ready_ = false;
  connecting_ = true;
  heartbeat_answer_mark_ = 0;  // a fresh transport counts from 0
  machine_ = std::make_unique<Machine>(config_, *this);
  std::weak_ptr<Connection> weak = shared_from_this();
  const std::uint64_t generation = generation_;
  Transport::Callbacks callbacks;
  callbacks.on_connected = [weak, generation] {
    auto self = weak.lock();
    if (!self || self->generation_ != generation) return;
    self->machine_->start();
  };
  callbacks.on_data = [weak, generation](const std::shared_ptr<ReadChunk>& chunk, const char* data,
                                         std::size_t size) {
    auto self = weak.lock();
    if (!self || self->generation_ != generation) return;
    const std::uint64_t frames = self->machine_->frames();
    self->machine_->receive(chunk, std::string_view(data, size));
    if (self->generation_ == generation)
      self->transport_->frame_state(self->machine_->partial_frame(),
                                    self->machine_->frames() != frames);
  };
  callbacks.on_closed = [weak, generation](std::error_code ec, const std::string& detail) {
    auto self = weak.lock();
    if (!self || self->generation_ != generation) return;
    self->closed(ec, detail);
  };
  callbacks.on_write_room = [weak, generation] {
    auto self = weak.lock();
    if (!self || self->generation_ != generation || !self->events_.on_write_room) return;
    self->events_.on_write_room();
  };
  // A fresh transport per attempt, whose callbacks carry this attempt's generation.
  transport_ = Transport::create(context_->strand(), transport_settings_, std::move(callbacks),
                                 context_.get());
  transport_->connect(target_);
}

// Only while this attempt is live: a machine that failed, or a connection being closed, writes
// nothing more.
template <class Write>
void Connection::write_while_live(Write&& write) {
  if (!transport_ || !(connecting_ || ready_)) return;
  struct RestoreOnExit {
    bool& flag;
    bool before;
    ~RestoreOnExit() { flag = before; }
  } restore_on_exit{writing_, std::exchange(writing_, true)};
  write(*transport_);
}

void Connection::send(std::string bytes) {
  write_while_live([&](Transport& transport) { transport.write(std::move(bytes)); });
}

void Connection::send(std::shared_ptr<const std::string> body) {
  write_while_live([&](Transport& transport) { transport.write(std::move(body)); });
}

void Connection::send_copy(std::string_view bytes) {
  write_while_live([&](Transport& transport) { transport.write_copy(bytes); });
}

void Connection::on_heartbeat() {
  if (events_.on_heartbeat) events_.on_heartbeat();
}

bool Connection::heartbeat_answer_unsent() const {
  return transport_ && transport_->total_written() < heartbeat_answer_mark_;
}

void Connection::sent_heartbeat_answer() {
  if (transport_) heartbeat_answer_mark_ = transport_->total_queued();
}

void Connection::close() {
  ++generation_;
  ready_ = connecting_ = false;
  if (transport_) transport_->close();
}

void Connection::close_after_flush() {
  ++generation_;
  ready_ = connecting_ = false;
  if (transport_) transport_->close_after_flush();
}

void Connection::fail(std::error_code ec, const std::string& detail) {
  if (!connecting_ && !ready_) return;
  // Through the transport, which reports it (adding what the server's first bytes looked like
  // when they were another protocol's); directly if the transport had already ended.
  if (transport_) transport_->fail(ec, detail);
  closed(ec, detail);
}

void Connection::closed(std::error_code ec, const std::string& detail) {
  if (!connecting_ && !ready_) return;
  ++generation_;
  ready_ = connecting_ = false;
  if (!events_.on_closed) return;
  if (!writing_) return events_.on_closed(ec, detail);
  // Ended by a write: told once the writer's call has returned (writing_ says why), unless the
  // owner closed this connection or started another attempt meanwhile.
  asio::post(context_->strand(), [weak = weak_from_this(), generation = generation_, ec, detail] {
    auto self = weak.lock();
    if (self && self->generation_ == generation && self->events_.on_closed)
      self->events_.on_closed(ec, detail);
  });
}

void Connection::on_start_tls() {
  const std::uint64_t generation = generation_;
  std::weak_ptr<Connection> weak = shared_from_this();
  transport_->start_tls([weak, generation](std::error_code ec) {
    auto self = weak.lock();
    if (!self || self->generation_ != generation || ec) return;  // a failure closes the transport
    self->machine_->tls_established();
  });
}

void Connection::on_ready(const IdentifyResponse& negotiated) {
  connecting_ = false;
  ready_ = true;
  transport_->established();
  // Two heartbeat intervals without a whole frame mean the connection is dead (go-nsq sets its
  // read deadline so). Whole frames, not bytes: a live nsqd sends a heartbeat each interval, so a
  // frame that drips in a byte at a time for longer is no sign of life.
  std::chrono::milliseconds idle = read_timeout_;
  std::string clock = "read_timeout";
  if (idle.count() == 0 && config_.identify.heartbeat_interval.value_or(30000) > 0) {
    const std::int64_t heartbeat = config_.identify.heartbeat_interval.value_or(30000);
    idle = std::chrono::milliseconds(2 * heartbeat);
    clock = "two heartbeat intervals of " + std::to_string(heartbeat) + "ms";
  }
  if (idle.count() > 0) {
    std::weak_ptr<Connection> weak = shared_from_this();
    transport_->set_idle_timeout(
        idle,
        [weak, idle, clock] {
          auto self = weak.lock();
          if (!self) return;
          const char* what = self->transport_->partial_frame()
                                 ? ": a frame begun and no whole frame for "
                                 : ": no frame for ";
          self->fail(make_error_code(polybus::errc::timeout),
                     self->endpoint_ + what + std::to_string(idle.count()) + "ms (" + clock +
                         "): connection presumed dead");
        },
        Transport::IdleCounts::frames);
  }
  context_->log(LogLevel::debug, endpoint_ + ": ready (nsqd " + negotiated.version +
                                     ", max_rdy_count " + std::to_string(negotiated.max_rdy_count) +
                                     ")");
  if (events_.on_ready) events_.on_ready();
}

void Connection::on_message(const MessageView& message, const std::shared_ptr<const void>& owner) {
  if (events_.on_message) events_.on_message(message, owner);
}

void Connection::on_response(std::string_view body) {
  if (events_.on_response) events_.on_response(body);
}

void Connection::on_server_error(const ServerError& error) {
  if (events_.on_server_error) events_.on_server_error(error);
}

void Connection::on_failure(std::error_code ec, const std::string& detail) {
  fail(ec, endpoint_ + ": " + detail);
}

}  // namespace polybus::nsq
