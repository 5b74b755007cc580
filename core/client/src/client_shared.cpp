// SPDX-License-Identifier: Apache-2.0
// The client's shared state: its counters' snapshot, and its error and log hooks.
#include "client_shared.hpp"

#include <asio/post.hpp>

#include "context_watch.hpp"
#include "polybus/error.hpp"
#include "runtime.hpp"

namespace polybus {

namespace detail {

Stats AtomicStats::snapshot() const {
  Stats s;
  s.published = published.load();
  s.publish_acked = publish_acked.load();
  s.publish_failed = publish_failed.load();
  s.received = received.load();
  s.acked = acked.load();
  s.nacked = nacked.load();
  s.discarded = discarded.load();
  s.dead_lettered = dead_lettered.load();
  s.delivered_raw = delivered_raw.load();
  s.requests = requests.load();
  s.replies = replies.load();
  s.reconnects = reconnects.load();
  s.bytes_in = bytes_in.load();
  s.bytes_out = bytes_out.load();
  return s;
}

ClientShared::~ClientShared() {
  if (watch_) watch_->remove(this);
}

void ClientShared::watch_context(asio::io_context& io) {
  watch_ = &asio::use_service<ContextWatch>(io);
  watch_->add(this, "'" + name + "' (" + scheme + ")");
}

bool ClientShared::on_io_context() const {
  return runtime && runtime->io->get_executor().running_in_this_thread();
}

void ClientShared::emit_error(std::error_code ec, const std::string& message) const {
  if (closed.load()) return;
  if (!strand.running_in_this_thread()) {
    auto self = weak_from_this().lock();
    if (!self) return;  // going away: there is no strand turn left to tell it on
    asio::post(strand, [self = std::move(self), ec, message] {
      if (!self->closed.load()) self->call_on_error(ec, message);
    });
    return;
  }
  call_on_error(ec, message);
}

void ClientShared::call_on_error(std::error_code ec, const std::string& message) const {
  if (!on_error) return call_log(LogLevel::warn, message + " (" + ec.message() + ")");
  try {
    on_error(ec, message);
  } catch (const std::exception& e) {
    call_log(LogLevel::error, "the application's on_error threw: " + std::string(e.what()) +
                                  " (it was told: " + message + ")");
  } catch (...) {
    call_log(
        LogLevel::error,
        "the application's on_error threw a non-standard exception (it was told: " + message + ")");
  }
}

void ClientShared::notify_state(const StateEvent& event) const {
  if (!on_state) return;
  if (!strand.running_in_this_thread()) {
    auto self = weak_from_this().lock();
    if (!self) return;
    asio::post(strand, [self = std::move(self), event] {
      if (!self->closed.load()) self->notify_state(event);
    });
    return;
  }
  try {
    on_state(event);
  } catch (const std::exception& e) {
    call_on_error(make_error_code(errc::handler_failed),
                  std::string("the application's on_state threw: ") + e.what());
  } catch (...) {
    call_on_error(make_error_code(errc::handler_failed),
                  "the application's on_state threw a non-standard exception");
  }
}

void ClientShared::log(LogLevel level, std::string_view text) const {
  if (!logs(level)) return;
  if (!strand.running_in_this_thread()) {
    auto self = weak_from_this().lock();
    if (!self) return;
    asio::post(strand, [self = std::move(self), level, line = std::string(text)] {
      self->call_log(level, line);
    });
    return;
  }
  call_log(level, text);
}

void ClientShared::call_log(LogLevel level, std::string_view text) const {
  if (!logs(level)) return;
  try {
    log_sink(level, text);
  } catch (...) {
    // Nothing comes after the log to tell.
  }
}

}  // namespace detail
}  // namespace polybus
