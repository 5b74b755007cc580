// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <asio/post.hpp>

#include "polybus/error.hpp"

namespace polybus::memodb::detail {

using polybus::errc;

namespace {

class ServeHandle : public AdapterSubscription {
 public:
  ServeHandle(std::shared_ptr<Connection> connection, std::uint64_t id)
      : connection_(std::move(connection)), id_(id) {}
  void unsubscribe(OpCompletion done) override { connection_->unsubscribe(id_, std::move(done)); }
  void pause() override { connection_->set_paused(id_, true); }
  void resume() override { connection_->set_paused(id_, false); }
  void set_max_in_flight(std::uint32_t n) override { connection_->set_workers(id_, n); }

 private:
  std::shared_ptr<Connection> connection_;
  std::uint64_t id_;
};

}  // namespace

Connection::Connection(const AdapterContext& context, ConnectionSettings settings)
    : ctx_(context),
      settings_(std::move(settings)),
      reconnect_(context, settings_.address),
      close_timer_(context.strand()) {}

Connection::~Connection() {
  shutdown();
}

void Connection::open() {
  Req0Settings s;
  s.address = settings_.address;
  s.max_message = settings_.max_message;
  s.connect_timeout = settings_.connect_timeout;
  s.frame_timeout = settings_.frame_timeout;
  s.write_timeout = settings_.write_timeout;
  Req0Socket::Events events;
  events.connected = [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->connected();
  };
  events.ended = [weak = weak_from_this()](std::error_code why, const std::string& detail,
                                           bool was_up) {
    if (auto self = weak.lock()) self->ended(why, detail, was_up);
  };
  events.bytes_in = [weak = weak_from_this()](std::size_t n) {
    if (auto self = weak.lock()) self->ctx_.count_bytes_in(n);
  };
  socket_ = std::make_shared<Req0Socket>(ctx_.strand(), std::move(s), std::move(events));
  asio::post(ctx_.strand(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->dead_) return;
    self->reconnect_.attempting();
    self->socket_->connect();
  });
}

void Connection::connected() {
  reconnect_.connected();
  requests_.count_waiting();
}

void Connection::ended(std::error_code why, const std::string& detail, bool) {
  if (dead_ || closing_) return;
  requests_.count_waiting();
  reconnect_.lost(why, detail, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->dead_ || self->closing_) return;
    self->reconnect_.attempting();
    self->socket_->connect();
  });
}

void Connection::cancel(Slot& slot) {
  if (slot.pending && slot.exchange)
    socket_->cancel(slot.exchange, make_error_code(errc::closed), "client closed");
}

std::shared_ptr<AdapterSubscription> Connection::serve(const std::string& service,
                                                       std::uint32_t workers,
                                                       std::shared_ptr<SubscriptionSink> sink) {
  const std::uint64_t id = workers_.serve(service, workers, std::move(sink));
  return std::make_shared<ServeHandle>(shared_from_this(), id);
}

void Connection::unsubscribe(std::uint64_t serve, OpCompletion done) {
  workers_.unsubscribe(serve);
  done({});
}

void Connection::reply(polybus::detail::MessageState& message, std::string payload,
                       std::error_code ec, std::string detail) {
  if (dead_) return;
  workers_.reply(message, std::move(payload), ec, std::move(detail));
}

// ---- close ----

void Connection::close(Clock::time_point deadline, std::function<void()> done) {
  if (dead_) {
    if (done) done();
    return;
  }
  closing_ = true;
  close_pending_ = true;
  close_done_ = std::move(done);
  requests_.close();
  workers_.close();
  close_timer_.expires_at(deadline);
  close_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->finish_close();
  });
  maybe_finish_close();
}

void Connection::maybe_finish_close() {
  if (!close_pending_ || dead_) return;
  if (requests_.exchanging() || workers_.exchanging()) return;
  finish_close();
}

void Connection::finish_close() {
  if (dead_) return;
  close_timer_.cancel();
  auto done = std::move(close_done_);
  close_done_ = nullptr;
  shutdown();
  reconnect_.closed();
  if (done) done();
}

void Connection::shutdown() {
  if (dead_) return;
  dead_ = true;
  closing_ = true;
  reconnect_.cancel();
  requests_.shutdown();
  workers_.shutdown();  // drops the sinks (the core's subscriptions)
  // The exchanges' completions find nothing from here on (dead_).
  if (socket_) socket_->close();
}

}  // namespace polybus::memodb::detail
