// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/reconnect.hpp"

#include <asio/post.hpp>

namespace polybus {

std::chrono::milliseconds Reconnector::schedule(std::function<void()> attempt) {
  auto delay = state_.next();
  timer_.expires_after(delay);
  timer_.async_wait([attempt = std::move(attempt)](std::error_code ec) {
    if (!ec) attempt();
  });
  return delay;
}

ReconnectLoop::ReconnectLoop(const Strand& strand, Backoff policy, std::string endpoint,
                             Reports reports, std::shared_ptr<ManualClock> clock)
    : strand_(strand),
      retries_(strand, std::move(policy), std::move(clock)),
      endpoint_(std::move(endpoint)),
      reports_(std::move(reports)) {}

// One copy of the context, shared by both reports (capturing it by value copied it twice).
ReconnectLoop::ReconnectLoop(const AdapterContext& context, std::string endpoint)
    : ReconnectLoop(std::make_shared<const AdapterContext>(context), std::move(endpoint)) {}

ReconnectLoop::ReconnectLoop(std::shared_ptr<const AdapterContext> context, std::string endpoint)
    : ReconnectLoop(context->strand(), context->backoff(), std::move(endpoint),
                    Reports{[context](const StateEvent& e) {
                              context->state(e.state, e.endpoint, e.reason, e.detail, e.retry_in);
                            },
                            [context] { context->count_reconnect(); }},
                    context->clock()) {}

void ReconnectLoop::attempting() {
  up_ = proven_ = false;
  report(ConnectionState::connecting);
}

void ReconnectLoop::connected() {
  up_ = true;
  proven_ = false;
  report(ConnectionState::connected);
}

void ReconnectLoop::ended(std::error_code reason, const std::string& detail) {
  const bool was_up = up_;
  up_ = proven_ = false;
  if (was_up && reports_.reconnected) reports_.reconnected();
  report(ConnectionState::disconnected, reason, detail);
}

void ReconnectLoop::retired(std::error_code reason, const std::string& detail) {
  up_ = proven_ = false;
  retries_.cancel();
  report(ConnectionState::disconnected, reason, detail);
}

void ReconnectLoop::closed() {
  up_ = proven_ = false;
  retries_.cancel();
  report(ConnectionState::closed, {}, {});
}

std::chrono::milliseconds ReconnectLoop::retry(std::error_code reason, const std::string& detail,
                                               std::function<void()> attempt) {
  auto delay = retries_.schedule(std::move(attempt));
  report(ConnectionState::reconnecting, reason, detail, delay);
  return delay;
}

void ReconnectLoop::retry_now(std::error_code reason, const std::string& detail,
                              std::function<void()> attempt) {
  retries_.cancel();
  report(ConnectionState::reconnecting, reason, detail);
  asio::post(strand_, std::move(attempt));
}

void ReconnectLoop::retried_by_transport(std::error_code reason, const std::string& detail,
                                         std::chrono::milliseconds retry_in) {
  report(ConnectionState::reconnecting, reason, detail, retry_in);
}

std::chrono::milliseconds ReconnectLoop::lost(std::error_code reason, const std::string& detail,
                                              std::function<void()> attempt) {
  ended(reason, detail);
  return retry(reason, detail, std::move(attempt));
}

bool ReconnectLoop::move() {
  const auto now = retries_.now();
  if (!moves_going_on(now)) moves_in_run_ = 0;
  last_move_ = now;
  ++moves_in_run_;
  return moves_in_run_ <= kMovesAtOnce;
}

void ReconnectLoop::report(ConnectionState state, std::error_code reason, const std::string& detail,
                           std::chrono::milliseconds retry_in) const {
  if (reports_.state) reports_.state(StateEvent{state, endpoint_, reason, detail, retry_in});
}

}  // namespace polybus
