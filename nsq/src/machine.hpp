// SPDX-License-Identifier: Apache-2.0
// The NSQ connection's protocol state machine, sans I/O: bytes in, events and bytes out.
// It runs the handshake nsqd 1.3 expects (magic, IDENTIFY with feature negotiation, the TLS
// upgrade, the switch to snappy or deflate, AUTH), answers heartbeats, and turns frames into
// events. The machine pushes the bytes to write to its handler as it makes them (as AMQP-CPP's
// ConnectionHandler is given them); the owner performs the TLS upgrade when asked
// (on_start_tls), then calls tls_established().
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "polybus/adapter/payloads.hpp"
#include "polybus/io/kept_copies.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/nsq/compression.hpp"

namespace polybus::nsq {

struct MachineConfig {
  IdentifyRequest identify;
  std::string auth_secret;  // sent when nsqd says auth_required
  std::size_t max_frame_size = kDefaultMaxFrameSize;
  // Decompressed bytes one receive() may produce (the budget's max_decoded_per_read): a
  // decompression bomb fails the connection instead of allocating.
  std::size_t max_decoded_per_read = kDefaultMaxDecodedPerCall;
};

class MachineHandler {
 public:
  virtual ~MachineHandler() = default;
  // Bytes to write, in order: the session's own, and publish bodies shared with the caller
  // (gather-written, not copied).
  virtual void send(std::string bytes) = 0;
  virtual void send(std::shared_ptr<const std::string> body) = 0;
  // Small bytes the session reuses its buffer for (a command, a header): the handler copies them.
  virtual void send_copy(std::string_view bytes) { send(std::string(bytes)); }
  virtual void on_start_tls() = 0;
  virtual void on_ready(const IdentifyResponse& negotiated) = 0;
  // owner keeps message.body alive (the read chunk, or a copy when the body was split or
  // decompressed).
  virtual void on_message(const MessageView& message, const std::shared_ptr<const void>& owner) = 0;
  virtual void on_response(std::string_view body) = 0;  // after the handshake: OK, CLOSE_WAIT...
  virtual void on_server_error(const ServerError& error) = 0;
  // nsqd's heartbeat arrived (once per receive() however many): the server is alive and sane.
  virtual void on_heartbeat() {}
  // The NOP last sent for a heartbeat is still waiting to be written to the socket: later
  // heartbeats wait for it, so a flood costs one pending answer, not one per heartbeat or read.
  virtual bool heartbeat_answer_unsent() const { return false; }
  // A NOP answering heartbeats was just sent (the last bytes given to send()).
  virtual void sent_heartbeat_answer() {}
  // The stream cannot go on (bad frame, handshake refused, fatal error frame): close it.
  virtual void on_failure(std::error_code ec, const std::string& detail) = 0;
};

class Machine {
 public:
  enum class Phase {
    idle,
    identifying,
    upgrading_tls,
    awaiting_tls_ok,
    awaiting_compression_ok,
    authenticating,
    ready,
    failed
  };

  Machine(MachineConfig config, MachineHandler& handler);

  void start();  // queues magic and IDENTIFY
  // Heartbeats are answered with one NOP, and none while the last one is still unsent.
  void receive(const std::shared_ptr<const void>& owner, std::string_view bytes);
  void tls_established();

  // Commands, queued in order. Errors: invalid names or ids, a body nsqd would refuse.
  std::error_code subscribe(std::string_view topic, std::string_view channel);
  void ready_count(std::uint32_t count);
  std::error_code finish(std::string_view id);
  std::error_code requeue(std::string_view id, std::uint32_t delay_ms);
  std::error_code touch(std::string_view id);
  void close_wait();  // CLS
  // The producer keeps bodies to publish again after a reconnect; a large one is written from
  // the kept bytes, not copied, when the stream is not compressed (KeptPayload).
  using Body = KeptPayload;
  std::error_code publish(std::string_view topic, const Body& body, std::uint32_t defer_ms = 0);
  std::error_code publish_batch(std::string_view topic, const std::vector<Body>& bodies);

  Phase phase() const { return phase_; }
  const IdentifyResponse& negotiated() const { return negotiated_; }
  bool compressed() const { return static_cast<bool>(codec_); }
  // Part of a frame is held (the transport's frame_timeout runs); frames completed so far.
  bool partial_frame() const { return !parser_.idle(); }
  std::uint64_t frames() const { return frames_; }

 private:
  void decode(const std::shared_ptr<const void>& owner, std::string_view bytes);
  void feed(const std::shared_ptr<const void>& owner, std::string_view bytes);
  void handle(const Frame& frame, const std::shared_ptr<const void>& owner);
  void handshake_response(std::string_view body);
  void after_tls();
  void after_compression();
  void emit(std::string bytes);
  void send_body(const Body& body);  // uncompressed: shared when kept shared, else copied
  // Writes scratch_ (a command or header built in it): copied by the handler, or compressed.
  void emit_scratch();
  void fail(std::error_code ec, const std::string& detail);

  MachineConfig config_;
  MachineHandler& handler_;
  FrameParser parser_;
  KeptCopies kept_;  // the frames that straddled two reads, for the messages viewing them
  Phase phase_ = Phase::idle;
  IdentifyResponse negotiated_;
  std::unique_ptr<StreamCodec> codec_;
  bool codec_pending_ = false;  // the rest of the current input is compressed already
  std::string decoded_;
  // Commands and headers are built here and copied out: no allocation per FIN, RDY or PUB header.
  std::string scratch_;
  // An MPUB's bodies as views, for its header's checks; kept so a burst allocates none.
  static constexpr std::size_t kViewsKeptAtMost = 4096;
  std::vector<std::string_view> views_;
  bool heartbeat_due_ = false;
  std::uint64_t frames_ = 0;
};

}  // namespace polybus::nsq
