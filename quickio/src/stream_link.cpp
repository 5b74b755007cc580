// SPDX-License-Identifier: Apache-2.0
#include "stream_link.hpp"

#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"

namespace polybus::quickio::detail {

StreamLink::StreamLink(const Strand& strand, TransportSettings settings, HostPort target,
                       std::chrono::milliseconds handshake_timeout, LinkHandler& handler,
                       const AdapterContext* stats)
    : strand_(strand),
      settings_(std::move(settings)),
      target_(std::move(target)),
      handshake_timeout_(handshake_timeout),
      handler_(handler),
      handshake_timer_(strand) {
  if (stats) stats_.emplace(*stats);
}

StreamLink::~StreamLink() {
  // After close() the transport sends what it holds and closes by itself (close_after_flush).
  if (transport_ && !ended_) transport_->close();
  fail_unwritten(make_error_code(polybus::errc::disconnected));
}

void StreamLink::start() {
  Transport::Callbacks callbacks;
  std::weak_ptr<StreamLink> weak = shared_from_this();
  callbacks.on_connected = [weak] {
    auto self = weak.lock();
    if (!self || self->ended_) return;
    self->tcp_up_ = true;
    self->wire_->start();
    self->flush();
    self->handshake_timer_.expires_after(self->handshake_timeout_);
    self->handshake_timer_.async_wait([weak](std::error_code ec) {
      auto me = weak.lock();
      if (ec || !me || me->ended_ || me->wire_->is_open()) return;
      me->fail(make_error_code(client_errc::handshake_refused),
               me->endpoint() + ": no /qio/ohai answer within the connect timeout");
    });
  };
  callbacks.on_data = [weak](const std::shared_ptr<ReadChunk>& chunk, const char* data,
                             std::size_t n) {
    if (auto self = weak.lock()) self->on_data(chunk, data, n);
  };
  callbacks.on_closed = [weak](std::error_code ec, const std::string& detail) {
    if (auto self = weak.lock()) self->on_closed(ec, detail);
  };
  callbacks.on_written = [weak](std::uint64_t total_written) {
    if (auto self = weak.lock()) self->on_written(total_written);
  };
  callbacks.on_write_room = [weak] {
    if (auto self = weak.lock(); self && !self->ended_)
      self->handler_.on_link_write_room(self.get());
  };
  transport_ =
      Transport::create(strand_, settings_, std::move(callbacks), stats_ ? &*stats_ : nullptr);
  transport_->connect(target_);
}

void StreamLink::send(std::string_view event, WrittenFn written) {
  if (ended_ || !wire_->is_open()) {
    if (written) written(make_error_code(polybus::errc::disconnected));
    return;
  }
  wire_->send(event);
  flush();
  if (ended_) {
    // The write itself ended the link (over max_write_buffer): the event is not sent, and
    // nothing will report it written.
    if (written) written(end_reason_);
    return;
  }
  if (written) unwritten_.emplace_back(transport_->total_queued(), std::move(written));
}

void StreamLink::on_written(std::uint64_t total_written) {
  while (!unwritten_.empty() && unwritten_.front().first <= total_written) {
    auto written = std::move(unwritten_.front().second);
    unwritten_.pop_front();
    written({});
  }
}

void StreamLink::fail_unwritten(std::error_code ec) {
  auto pending = std::move(unwritten_);
  unwritten_.clear();
  for (auto& entry : pending) entry.second(ec);
}

void StreamLink::close() {
  ended_ = true;
  handshake_timer_.cancel();
  // Events handed to the transport were reported written (publish completes then): send them
  // before the connection goes, within the write deadline.
  if (transport_) transport_->close_after_flush();
}

void StreamLink::fail(std::error_code ec, const std::string& detail) {
  if (ended_) return;
  if (transport_ && (transport_->connected() || !tcp_up_))
    transport_->fail(ec, detail);
  else
    on_closed(ec, detail);
}

void StreamLink::on_wire_open() {
  handshake_timer_.cancel();
  handler_.on_link_open(this);
}

void StreamLink::on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) {
  ++events_;
  if (!ended_) handler_.on_link_event(this, text, owner);
}

void StreamLink::flush() {
  auto& out = wire_->output();
  if (out.empty() || ended_) return out.clear();
  // Output up to a piece's size is copied into the transport's pieces and this buffer kept for
  // the next event: no allocation per event, however many wait to be written. Larger output is
  // handed over whole, and a string the transport has written takes its place (one with room,
  // once they grew), which allocates nothing unless more are waiting than the transport keeps.
  if (out.size() <= Transport::kPieceSize) {
    transport_->write_copy(out);
  } else {
    std::string next = transport_->spare_string(out.size());
    transport_->write(std::move(out));
    out = std::move(next);
  }
  out.clear();
}

void StreamLink::on_data(const std::shared_ptr<ReadChunk>& chunk, const char* data, std::size_t n) {
  if (ended_) return;
  std::string why;
  auto keep = shared_from_this();  // a handler may drop the link while it runs
  const std::uint64_t events_before = events_;
  const std::uint64_t frames_before = wire_->frames_completed();
  auto ec = wire_->receive(chunk, std::string_view(data, n), why);
  if (ended_) return;
  flush();
  if (ec) return fail(ec, endpoint() + ": " + why);
  const bool completed = events_ != events_before || wire_->frames_completed() != frames_before;
  // Liveness counts whole frames: bytes of a frame that drips in are no sign of life.
  if (completed || !wire_->partial_frame()) handler_.on_link_activity(this);
  if (ended_) return;
  transport_->frame_state(wire_->partial_frame(), completed);
}

void StreamLink::on_closed(std::error_code ec, const std::string& detail) {
  if (ended_) return;
  ended_ = true;
  end_reason_ = ec ? ec : make_error_code(polybus::errc::disconnected);
  handshake_timer_.cancel();
  bool refused = tcp_up_ && !wire_->is_open();
  fail_unwritten(make_error_code(polybus::errc::disconnected));
  handler_.on_link_closed(this, ec ? ec : make_error_code(std::errc::connection_reset),
                          detail.empty() ? endpoint() + ": connection closed" : detail, refused);
}

}  // namespace polybus::quickio::detail
