// SPDX-License-Identifier: Apache-2.0
#include "http_session.hpp"

#include "connection.hpp"

namespace polybus::quickio::testing {

HttpSession::HttpSession(ServerImpl& server_impl, std::string session_id)
    : Peer(server_impl, Kind::http),
      sid(std::move(session_id)),
      hold_timer_(server_impl.io_.context()) {}

void HttpSession::write_event(std::string_view text) {
  queue_.append(text);
  queue_.push_back('\n');
  if (queue_.size() > kMaxQueuedBytes) {
    // Ended later: the caller may be iterating over subscribers.
    asio::post(server.io_.context(), [this, alive = std::weak_ptr<bool>(alive_)] {
      if (!alive.expired()) server.end_session(*this);
    });
    return;
  }
  if (held_) schedule_flush();
}

void HttpSession::close_transport() {
  server.end_session(*this);
}

void HttpSession::reset_transport() {
  auto connection = held_ ? held_connection_.lock() : nullptr;
  held_ = false;
  held_connection_.reset();
  if (connection) connection->reset();
  server.end_session(*this);
}

void HttpSession::hold_output(std::chrono::milliseconds delay) {
  output_held_ = true;
  hold_timer_.expires_after(delay);
  hold_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
    if (ec || alive.expired()) return;  // cancelled, or a later delay took over
    output_held_ = false;
    if (held_ && !queue_.empty() && !server.silent_) complete_held();
  });
}

void HttpSession::end_after_delivery() {
  if (held_ || queue_.empty()) return server.end_session(*this);
  // The client is in its pause between polls: it has yet to POST again.
  ending_ = true;
  server.peer_gone(*this);
}

void HttpSession::schedule_flush() {
  // Events produced by one handler go out in one response.
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  asio::post(server.io_.context(), [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    flush_scheduled_ = false;
    if (held_ && !queue_.empty() && !server.silent_ && !output_held_) complete_held();
  });
}

void HttpSession::hold(const std::shared_ptr<Connection>& connection, std::uint64_t response_id) {
  complete_held();
  held_ = true;
  held_connection_ = connection;
  held_response_ = response_id;
  held_since = Clock::now();
  if (!queue_.empty() && !output_held_) complete_held();
}

void HttpSession::complete_held() {
  if (!held_) return;
  held_ = false;
  auto connection = held_connection_.lock();
  held_connection_.reset();
  // Output held by a delay fault: the poll is answered empty and the queue waits.
  if (output_held_) {
    if (connection) connection->complete_response(held_response_, {});
    return;
  }
  // A poll whose connection is gone takes nothing: the queue waits for the next POST.
  if (connection && connection->complete_response(held_response_, queue_)) queue_.clear();
}

}  // namespace polybus::quickio::testing
