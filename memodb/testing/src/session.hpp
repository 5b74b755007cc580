// SPDX-License-Identifier: Apache-2.0
// Internal: one client connection of the MemoDB test broker, rep0 over Asio: the SP headers, the
// framing through the sans-IO SP codec, and a budget of what the connection may make the broker
// hold (over it, reading stops until half is gone).
#pragma once

#include <algorithm>
#include <asio.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "polybus/memodb/sp.hpp"

namespace polybus::memodb::testing {

// The broker speaks NNG's scalability protocol (SP) itself, over Asio, through the sans-IO SP
// codec (polybus/memodb/sp.hpp): the test broker shares its process with the clients under
// test, and libnng 1.5.2 stalls its process-wide reaper when a TCP pipe is closed while a
// partial read completes (a pipe cut mid-message by a reset; NNG #1636, fixed in 1.6.0), after
// which no NNG socket in the process, the clients' included, sees a pipe go or dials again.
class Session : public std::enable_shared_from_this<Session> {
 public:
  using Socket = asio::generic::stream_protocol::socket;
  struct Events {
    std::function<void(std::uint64_t id)> opened;  // the headers are exchanged
    std::function<void(std::uint64_t id, std::string backtrace, std::string_view body)> request;
    std::function<void(std::uint64_t id)> closed;  // after opened, once
    std::function<void()> stalled;                 // a connection's reading stopped (budget)
    std::uint64_t bytes_received = 0;              // by every connection
    std::uint64_t bytes_sent = 0;
    std::uint64_t held_requests_peak = 0;  // the most any one connection held
    std::uint64_t held_bytes_peak = 0;
  };
  // What one connection may make the broker hold (BrokerOptions::max_held_*).
  struct Budget {
    std::size_t requests;
    std::size_t bytes;
  };

  Session(Socket socket, sp::Carrier carrier, std::uint64_t id, Events* events, Budget budget)
      : socket_(std::move(socket)),
        carrier_(carrier),
        id_(id),
        events_(events),
        budget_(budget),
        decoder_(carrier, kMaxMessage),
        hold_timer_(socket_.get_executor()) {}

  std::uint64_t id() const { return id_; }

  void start() {
    send_raw(sp::connection_header(sp::Protocol::rep0));
    asio::async_read(
        socket_, asio::buffer(peer_header_),
        [self = shared_from_this()](std::error_code ec, std::size_t) {
          if (ec || sp::check_connection_header(
                        std::string_view(self->peer_header_, sp::kHeaderSize), sp::Protocol::req0))
            return self->close();
          self->opened_ = true;
          if (self->events_) self->events_->opened(self->id_);
          self->read();
        });
  }

  // As rep0: a reply to a connection that went is dropped.
  void send(std::string_view backtrace, std::string_view header, std::string_view payload) {
    const std::size_t length = backtrace.size() + header.size() + payload.size();
    std::string frame = sp::frame_prefix(carrier_, length);
    frame.reserve(frame.size() + length);
    frame.append(backtrace).append(header).append(payload);
    send_raw(std::move(frame));
  }

  // A request of this connection was answered or dropped: the broker holds it no longer.
  void released(std::size_t bytes) {
    held_requests_ -= std::min<std::size_t>(held_requests_, 1);
    held_bytes_ -= std::min(held_bytes_, bytes);
    resume_when_room();
  }

  // Ends the connection without telling the broker (it is closing everything).
  void close_quietly() {
    events_ = nullptr;
    close();
  }

  // Faults. Ends the connection now, telling the broker; reset: with a TCP RST (over IPC a
  // plain close: Unix sockets have none).
  void end(bool reset) {
    auto self = shared_from_this();  // the broker may drop its owner in `closed`
    close(reset);
  }
  // Ends the connection once what is queued for it is written.
  void end_when_written() {
    end_when_written_ = true;
    if (!writing_ && writes_.empty()) end(false);
  }
  // Writes nothing until `delay` has passed; what is sent meanwhile waits in order.
  void hold_output(std::chrono::milliseconds delay) {
    output_held_ = true;
    hold_timer_.expires_after(delay);
    hold_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->closed_) return;  // cancelled, or a later delay took over
      self->output_held_ = false;
      self->write_next();
    });
  }

 private:
  // The real broker takes any size (payloads of many MiB pass); this one stops somewhere.
  static constexpr std::size_t kMaxMessage = std::size_t{1} << 30;

  void read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              if (self->events_) self->events_->bytes_received += n;
                              self->received(std::string_view(self->buffer_, n));
                            });
  }

  void received(std::string_view bytes) {
    while (!closed_) {
      if (held_requests_ >= budget_.requests || held_bytes_ >= budget_.bytes) {
        // Over budget: the rest of this read waits, and no read is started, until half of what
        // the connection holds is gone. The peer's writes then wait in TCP.
        unread_ = bytes;
        stalled_ = true;
        if (events_ && events_->stalled) events_->stalled();
        return;
      }
      std::error_code ec;
      bytes.remove_prefix(decoder_.feed(bytes, ec));
      if (ec) return close();
      if (!decoder_.ready()) break;
      const std::string message = decoder_.take();
      std::string_view backtrace, body;
      bool too_many_hops = false;
      if (sp::split_request(message, backtrace, body, too_many_hops))
        return close();             // no request ID: rep0 closes on such a peer
      if (too_many_hops) continue;  // dropped without a word, as rep0 does
      hold(message.size());
      if (events_) events_->request(id_, std::string(backtrace), body);
    }
    if (!closed_) read();
  }

  void hold(std::size_t bytes) {
    ++held_requests_;
    held_bytes_ += bytes;
    if (!events_) return;
    events_->held_requests_peak =
        std::max<std::uint64_t>(events_->held_requests_peak, held_requests_);
    events_->held_bytes_peak = std::max<std::uint64_t>(events_->held_bytes_peak, held_bytes_);
  }

  // Posted: the caller may be the broker in the middle of another connection's request.
  void resume_when_room() {
    if (!stalled_ || closed_ || held_requests_ > budget_.requests / 2 ||
        held_bytes_ > budget_.bytes / 2)
      return;
    stalled_ = false;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      const std::string_view rest = self->unread_;
      self->unread_ = {};
      self->received(rest);
    });
  }

  void send_raw(std::string bytes) {
    if (closed_) return;
    held_bytes_ += bytes.size();
    if (events_)
      events_->held_bytes_peak = std::max<std::uint64_t>(events_->held_bytes_peak, held_bytes_);
    writes_.push_back(std::move(bytes));
    write_next();
  }

  void write_next() {
    if (writing_ || output_held_ || writes_.empty() || closed_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](std::error_code ec, std::size_t n) {
                        self->writing_ = false;
                        if (ec) return self->close();
                        if (self->events_) self->events_->bytes_sent += n;
                        self->held_bytes_ -=
                            std::min(self->held_bytes_, self->writes_.front().size());
                        self->writes_.pop_front();
                        self->resume_when_room();
                        if (self->end_when_written_ && self->writes_.empty()) return self->close();
                        self->write_next();
                      });
  }

  void close(bool reset = false) {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    hold_timer_.cancel();
    if (reset) {
      socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    } else {
      socket_.shutdown(Socket::shutdown_both, ignored);
    }
    socket_.close(ignored);
    if (opened_ && events_) events_->closed(id_);
  }

  Socket socket_;
  const sp::Carrier carrier_;
  const std::uint64_t id_;
  Events* events_;
  const Budget budget_;
  char peer_header_[sp::kHeaderSize] = {};
  char buffer_[64 * 1024];
  sp::FrameDecoder decoder_;
  std::deque<std::string> writes_;
  // Held for this connection: its requests not yet answered, their bytes and the bytes of the
  // answers not yet written.
  std::size_t held_requests_ = 0;
  std::size_t held_bytes_ = 0;
  bool stalled_ = false;
  std::string_view unread_;  // in buffer_: the rest of the read that stalled
  bool opened_ = false;
  bool closed_ = false;
  bool writing_ = false;
  bool end_when_written_ = false;
  asio::steady_timer hold_timer_;  // a delay fault: output held until it fires
  bool output_held_ = false;
};

}  // namespace polybus::memodb::testing
