// SPDX-License-Identifier: Apache-2.0
#include "connectivity.hpp"

namespace polybus::detail {

std::size_t Connectivity::connected_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return up_.size();
}

namespace {
// The portable code of a failure for want of a connection: what the server or the bytes said
// when that is what ended it (a refused AUTH, a bad frame, a TLS failure), else whether the
// connection was never up or went away.
errc failure_code(const Status& failure, bool connecting) {
  switch (const errc e = portable_condition(failure.code())) {
    case errc::broker_error:
    case errc::protocol_error:
    case errc::tls_error:
    case errc::frame_too_large:
    case errc::limit_exceeded:
      return e;
    default:
      return connecting ? errc::connect_failed : errc::disconnected;
  }
}

std::string millis(Clock::duration d) {
  return std::to_string(std::chrono::round<std::chrono::milliseconds>(d).count()) + "ms";
}
}  // namespace

std::string not_completed_within(const std::string& what, Clock::duration allowed) {
  return what + " not completed within " + millis(allowed);
}

void Connectivity::on_state(ConnectionState state, const std::string& endpoint,
                            std::error_code reason, const std::string& detail,
                            std::chrono::milliseconds retry_in) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (state) {
    case ConnectionState::connecting:
      attempting_.insert(endpoint);
      next_attempt_ = Clock::time_point::max();
      break;
    case ConnectionState::connected:
      attempting_.erase(endpoint);
      up_.insert(endpoint);
      ever_connected_ = true;
      break;
    case ConnectionState::disconnected:
    case ConnectionState::reconnecting: {
      const bool was_up = up_.erase(endpoint) > 0;
      const bool was_attempting = attempting_.erase(endpoint) > 0;
      if (!reason) break;
      std::string cause = detail.empty() ? reason.message() : detail;
      if (!endpoint.empty() && cause.find(endpoint) == std::string::npos)
        cause = endpoint + ": " + cause;
      // A reconnecting event repeats the disconnect it follows: keep how that one ended.
      if (was_up || was_attempting) last_failure_connecting_ = !was_up;
      last_failure_ = Status(reason, std::move(cause));
      last_failure_at_ = clock_ ? clock_->now() : Clock::now();
      if (state == ConnectionState::reconnecting && retry_in.count() > 0)
        next_attempt_ = last_failure_at_ + retry_in;
      break;
    }
    case ConnectionState::closed:
      up_.clear();
      attempting_.clear();
      break;
  }
  any_up_.store(!up_.empty(), std::memory_order_release);
}

Clock::time_point Connectivity::look_by(Clock::time_point started,
                                        Clock::time_point deadline) const {
  return ever_connected_ ? deadline : std::min(deadline, started + connect_timeout_);
}

bool Connectivity::exhausted(Clock::time_point started, Clock::time_point deadline) const {
  // An endpoint still being dialled may yet connect, whatever the others' backoff says (several
  // are dialled at once where publishes are spread over nodes).
  return up_.empty() && attempting_.empty() && last_failure_ &&
         next_attempt_ != Clock::time_point::max() && next_attempt_ >= look_by(started, deadline);
}

Clock::time_point Connectivity::first_look(Clock::time_point now,
                                           Clock::time_point deadline) const {
  if (any_up_.load(std::memory_order_acquire)) return deadline;  // look_by's, when connected
  std::lock_guard<std::mutex> lock(mutex_);
  return exhausted(now, deadline) ? now : look_by(now, deadline);
}

bool Connectivity::attempts_exhausted(Clock::time_point started, Clock::time_point deadline) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exhausted(started, deadline);
}

Status Connectivity::verdict(const std::string& what, Clock::time_point started,
                             Clock::time_point deadline, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool failed_since = last_failure_ && last_failure_at_ >= started;
  if (now < deadline) {
    // An early look: a client that never connected, after connect_timeout; or no attempt left
    // that can connect before the deadline.
    if (!up_.empty() || !last_failure_) return {};
    if (!ever_connected_)
      return Status(failure_code(last_failure_, true),
                    what + ": no connection within connect_timeout=" + millis(connect_timeout_) +
                        ": " + last_failure_.cause());
    if (!exhausted(started, deadline)) return {};
    return Status(failure_code(last_failure_, last_failure_connecting_),
                  what + ": not connected, and the next attempt, in " +
                      millis(next_attempt_ - now) +
                      ", comes after its deadline: " + last_failure_.cause());
  }
  const std::string late = not_completed_within(what, deadline - started);
  // Connected now, but a connection was lost since the operation began (one a server keeps
  // cutting, say): that is likely why, so it is said.
  if (!up_.empty())
    return Status(
        errc::timeout,
        failed_since ? late + ": a connection was lost meanwhile: " + last_failure_.cause() : late);
  if (failed_since || (!ever_connected_ && last_failure_))
    return Status(failure_code(last_failure_, last_failure_connecting_),
                  late + ": not connected: " + last_failure_.cause());
  return Status(errc::timeout, late + ": not connected yet");
}

std::string Connectivity::explain(const std::string& what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (up_.empty() && last_failure_) return what + ": not connected: " + last_failure_.cause();
  return what;
}

}  // namespace polybus::detail
