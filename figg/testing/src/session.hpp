// SPDX-License-Identifier: Apache-2.0
// Internal: one client connection of the Figg test broker: TLS if configured, frames through the
// sans-IO codec, ATTACH and DETACH with the real server's offsets (and, with its quirks, its
// oddities), PUBLISH into the topic's log, and DATA pumped per topic up to a high-water mark.
#pragma once

#include <chrono>

#include "broker.hpp"
#include "polybus/figg/codec.hpp"

namespace polybus::figg::testing {

constexpr auto kTlsHandshakeBound = std::chrono::seconds(5);  // as nsqd

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(BrokerImpl& broker, tcp::socket socket, std::uint64_t id)
      : broker_(broker),
        id_(id),
        stream_(std::move(socket), broker.tls_context_),
        hold_timer_(broker.io_.context()),
        parser_(broker.options_.max_payload) {}

  // The TLS handshake, if any, then reading; a client that fails the handshake is closed.
  void start() {
    stream_.async_handshake(kTlsHandshakeBound, [self = shared_from_this()](std::error_code ec) {
      if (ec) return self->finish();
      self->read();
    });
  }
  void close() {
    hold_timer_.cancel();
    stream_.close();
  }
  // Sends what topic `name`'s attachments have not been sent yet, up to the high-water mark.
  // One topic's publish pumps that topic's attachments, so that a session attached to 10,000
  // topics does not walk them all per message.
  void pump(const std::string& name);
  // For metrics: each attachment's topic and the messages it has not been sent yet.
  template <typename Visit>
  void each_attachment(Visit visit) const {
    for (const auto& [name, attachment] : attachments_) visit(name, attachment.next_number);
  }

 private:
  struct Attachment {
    std::uint64_t next_number;  // next message to send, by absolute number
  };

  void read() {
    stream_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->finish();
                              self->broker_.bytes_received_ += n;
                              self->received(std::string_view(self->buffer_, n));
                              if (self->stream_.is_open()) self->read();
                            });
  }
  void finish() {
    close();
    broker_.forget(this);
  }
  void received(std::string_view bytes) {
    while (!bytes.empty()) {
      Frame frame;
      auto result = parser_.feed(bytes, frame);
      // Unlike the real server (which crashes), a malformed message only closes this connection.
      if (result.error) return finish();
      bytes.remove_prefix(result.consumed);
      if (result.has_frame && !handle_with_faults(frame)) return finish();
    }
  }
  bool handle(const Frame& frame);
  // The journal's entry for the frame, then the fault rule that fires for it, if any: false
  // ends the connection (close, reset, and error: Figg has no error message).
  bool handle_with_faults(const Frame& frame);
  // What fault fires for `unit` of `topic`; a delay holds the output here.
  // Holds what the connection is sent for `delay` (a delay or hold fault).
  void hold_output(std::chrono::milliseconds delay);
  std::optional<polybus::testing::FaultRule> fault_for(std::string_view unit,
                                                       std::string_view topic);
  void journal(bool received, std::string_view kind, std::string_view topic,
               std::optional<std::uint64_t> id, std::size_t bytes);
  void send(std::string bytes, std::shared_ptr<const std::string> payload = nullptr) {
    queued_ += bytes.size() + (payload ? payload->size() : 0);
    queue_.push_back({std::move(bytes), std::move(payload)});
    write();
  }
  void write() {
    if (writing_ || held_ || queue_.empty() || !stream_.is_open()) return;
    writing_ = true;
    auto batch = std::make_shared<std::vector<Piece>>();
    std::vector<asio::const_buffer> buffers;
    while (!queue_.empty() && batch->size() < 64) {
      batch->push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    for (auto& p : *batch) {
      buffers.push_back(asio::buffer(p.bytes));
      if (p.payload) buffers.push_back(asio::buffer(*p.payload));
    }
    stream_.async_write(buffers,
                        [self = shared_from_this(), batch](std::error_code ec, std::size_t n) {
                          self->writing_ = false;
                          self->queued_ -= std::min(self->queued_, n);
                          self->broker_.bytes_sent_ += n;
                          if (ec) return self->finish();
                          // History continues as the client reads it: only where it had to
                          // stop at the high-water mark.
                          if (!self->stalled_.empty()) self->pump_stalled();
                          self->write();
                        });
  }

  struct Piece {
    std::string bytes;
    std::shared_ptr<const std::string> payload;
  };

  BrokerImpl& broker_;
  const std::uint64_t id_;  // the journal's number for the connection
  ServerStream stream_;
  asio::steady_timer hold_timer_;  // a delay fault: output held until it fires
  bool held_ = false;
  FrameParser parser_;
  char buffer_[64 * 1024];
  std::deque<Piece> queue_;
  std::size_t queued_ = 0;
  bool writing_ = false;
  // The topics whose attachments stopped at the high-water mark, in the order they did: after a
  // write, they are pumped in turn from the front until the mark is reached again. Walking every
  // attachment instead cost a session attached to 10,000 topics that walk on every write.
  std::deque<std::string> stalled_;
  std::set<std::string> stalled_names_;
  void mark_stalled(const std::string& name) {
    if (stalled_names_.insert(name).second) stalled_.push_back(name);
  }
  void pump_stalled();
  // The real server keeps every ATTACH of a topic on a connection (each delivers), so with
  // its quirks there can be several per topic; otherwise a new one replaces the old.
  std::multimap<std::string, Attachment> attachments_;
};

}  // namespace polybus::figg::testing
