// SPDX-License-Identifier: Apache-2.0
// The client's side of the adapter interface: what an AdapterContext reports (states, errors,
// logs, counts) reaches the client's shared state, and the messages it makes come from the
// client's pool. Declared with the interface (polybus/adapter/adapter.hpp), defined here beside
// that state.
#include <asio/post.hpp>

#include "client_shared.hpp"

namespace polybus {

AdapterContext::AdapterContext(Strand strand, Url url, ResolvedOptions options,
                               std::shared_ptr<detail::ClientShared> shared)
    : strand_(std::move(strand)),
      url_(std::move(url)),
      options_(std::move(options)),
      budget_(Budget::from_options(options_)),
      shared_(std::move(shared)),
      message_blocks_(detail::anchored_pool(shared_, shared_->message_blocks)) {}

void AdapterContext::state(ConnectionState state, const std::string& endpoint,
                           std::error_code reason, const std::string& detail,
                           std::chrono::milliseconds retry_in) const {
  if (shared_->closed.load()) return;  // the application heard closed: nothing after it
  // On the strand, as the application's callbacks are: an adapter reports from there anyway.
  if (!shared_->strand.running_in_this_thread()) {
    asio::post(shared_->strand, [context = *this, state, endpoint, reason, detail, retry_in] {
      context.state(state, endpoint, reason, detail, retry_in);
    });
    return;
  }
  shared_->connectivity.on_state(state, endpoint, reason, detail, retry_in);
  if (state == ConnectionState::reconnecting && shared_->on_retry_scheduled)
    shared_->on_retry_scheduled();
  shared_->notify_state(StateEvent{state, endpoint, reason, detail, retry_in});
  if (shared_->logs(reason ? LogLevel::warn : LogLevel::info)) {
    std::string line = endpoint + ": " + to_string(state);
    if (state == ConnectionState::reconnecting)
      line += " in " + std::to_string(retry_in.count()) + "ms";
    if (reason) line += " (" + (detail.empty() ? reason.message() : detail) + ")";
    shared_->log(reason ? LogLevel::warn : LogLevel::info, line);
  }
}
void AdapterContext::error(std::error_code ec, const std::string& message) const {
  shared_->emit_error(ec, message);
}
void AdapterContext::log(LogLevel level, std::string_view text) const {
  shared_->log(level, text);
}
bool AdapterContext::logs(LogLevel level) const {
  return shared_->logs(level);
}
void AdapterContext::count_bytes_in(std::size_t n) const {
  shared_->stats.bytes_in += n;
}
void AdapterContext::count_bytes_out(std::size_t n) const {
  shared_->stats.bytes_out += n;
}
void AdapterContext::count_reconnect() const {
  ++shared_->stats.reconnects;
}
bool AdapterContext::has_custom_backoff() const {
  return shared_->custom_backoff.has_value();
}
const std::shared_ptr<ManualClock>& AdapterContext::clock() const {
  return shared_->clock;
}
Clock::time_point AdapterContext::now() const {
  return shared_->now();
}
Backoff AdapterContext::backoff() const {
  return shared_->custom_backoff ? *shared_->custom_backoff : Backoff::from_options(options_);
}

std::shared_ptr<detail::PublishNodeCells> AdapterContext::publish_node(std::string address) const {
  return shared_->publish_nodes.add(std::move(address));
}

void AdapterContext::waiting_publishes(std::size_t count) const {
  shared_->adapter_waiting_publishes.store(count, std::memory_order_relaxed);
}
void AdapterContext::waiting_requests(std::size_t count) const {
  shared_->adapter_waiting_requests.store(count, std::memory_order_relaxed);
}

std::shared_ptr<detail::MessageState> AdapterContext::make_message(
    std::weak_ptr<MessageBackend> backend) const {
  // The message's block holds the client's shared state for as long as the message lives.
  auto state = std::allocate_shared<detail::MessageState>(
      detail::PooledAllocator<detail::MessageState>(message_blocks_));
  state->backend = std::move(backend);
  state->client = shared_.get();
  return state;
}

}  // namespace polybus
