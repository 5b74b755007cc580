// SPDX-License-Identifier: Apache-2.0
// Cancellation and the hooks the client registers with it.
#include <utility>
#include <vector>

#include "cancellation_state.hpp"

namespace polybus {

Cancellation::Cancellation() : state_(std::make_shared<detail::CancellationState>()) {}

void Cancellation::cancel() const {
  std::map<std::uint64_t, std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->cancelled) return;
    state_->cancelled = true;
    hooks.swap(state_->hooks);
  }
  for (auto& [id, hook] : hooks) hook();  // outside the lock: a hook may take others
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cancelled;
}

namespace detail {

std::uint64_t on_cancel(CancellationState& state, std::function<void()> hook) {
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.cancelled) {
      const std::uint64_t id = state.next_id++;
      state.hooks.emplace(id, std::move(hook));
      return id;
    }
  }
  hook();
  return 0;
}

void forget_cancel(CancellationState& state, std::uint64_t id) {
  std::function<void()> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(state.mutex);
  auto it = state.hooks.find(id);
  if (it == state.hooks.end()) return;
  dropped = std::move(it->second);
  state.hooks.erase(it);
}

}  // namespace detail
}  // namespace polybus
