// SPDX-License-Identifier: Apache-2.0
// A subscription's flow: the budget of messages and bytes held for handlers, pull subscriptions
// hold, the application's pause and resume, a cool-down after failures, and touching what is
// held while delivery is paused so that the broker does not redeliver it.
#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"

namespace polybus::detail {

std::string SubscriptionCore::check_over_budget() {
  // Called with mutex_ held.
  if (over_budget_ || (held_messages() <= max_held_messages_ && held_bytes_ <= max_held_bytes_))
    return {};
  over_budget_ = true;
  return topic_ + ": " + std::to_string(held_messages()) + " messages (" +
         std::to_string(held_bytes_) +
         " bytes) wait for handlers, over max_held_messages=" + std::to_string(max_held_messages_) +
         " or max_held_bytes=" + std::to_string(max_held_bytes_) +
         ": pausing delivery until half drain";
}

void SubscriptionCore::check_under_half() {
  // Called with mutex_ held.
  if (over_budget_ && held_messages() <= max_held_messages_ / 2 &&
      held_bytes_ <= max_held_bytes_ / 2) {
    over_budget_ = false;
    asio::post(shared_->strand, [self = shared_from_this()] { self->apply_flow(); });
  }
}

void SubscriptionCore::apply_flow() {
  bool over;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    over = over_budget_ || pull_full_;
  }
  if (!adapter_) return;
  if (!adapter_->has_own_hold()) {
    // One pause serves both: the application's and the budget's.
    const bool want = user_paused_ || cooling_strand_ || over;
    if (want != adapter_paused_ && (want || active())) {
      adapter_paused_ = want;
      if (want)
        adapter_->pause();
      else
        adapter_->resume();
    }
    return;
  }
  if (over != adapter_held_ && (over || active())) {
    adapter_held_ = over;
    adapter_->hold(over);
  }
  const bool want = user_paused_ || cooling_strand_;
  if (want != adapter_paused_ && (want || active())) {
    adapter_paused_ = want;
    if (want)
      adapter_->pause();
    else
      adapter_->resume();
  }
}

void SubscriptionCore::hold_for_pull(bool full) {
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    if (pull_full_ == full) return;
    pull_full_ = full;
  }
  asio::post(shared_->strand, [self = shared_from_this()] { self->apply_flow(); });
}

void SubscriptionCore::taken(const Message& message) {
  // Called with mutex_ held.
  held_bytes_ -= std::min(held_bytes_, message.payload().size());
  check_under_half();
}

void SubscriptionCore::taken_ahead(const Message* first, std::size_t count) {
  // Called with mutex_ held. Their bytes stay in held_bytes_ until settled.
  if (!shared_->caps.touch) return;
  ahead_copies_.assign(first, first + count);
  ahead_handed_.store(0, std::memory_order_relaxed);
}

void SubscriptionCore::give_back_taken(Message message) {
  // Called with mutex_ held.
  queue_.push_front(std::move(message));
}

void SubscriptionCore::settle_taken_ahead(std::size_t handled_bytes) {
  // Called with mutex_ held, after the unhandled ones went back to queue_.
  ahead_copies_.swap(ahead_spent_);  // emptied by run_queue once the lock is released
  held_bytes_ -= std::min(held_bytes_, handled_bytes);
  check_under_half();
}

void SubscriptionCore::cool_down(std::chrono::milliseconds length) {
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    cooling_ = true;
  }
  asio::post(shared_->strand, [self = shared_from_this(), length] {
    self->cooling_strand_ = true;
    self->apply_flow();
    self->touch_held();
    self->cooling_timer_ =
        std::make_unique<ClockTimer>(self->shared_->strand, self->shared_->clock);
    self->cooling_timer_->expires_after(length);
    self->cooling_timer_->async_wait(
        [weak = self->weak_from_this(), arming = ++self->cooling_arming_](std::error_code ec) {
          auto me = weak.lock();
          if (ec || !me || me->cooling_arming_ != arming) return;
          {
            std::lock_guard<BriefMutex> lock(me->mutex_);
            me->cooling_ = false;
          }
          me->cooling_strand_ = false;
          if (!me->user_paused_) me->stop_touching();
          me->apply_flow();
          me->start_handlers();
        });
  });
}

void SubscriptionCore::drain_held() {
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    delivery_paused_ = false;
    if (auto client = client_.lock(); !client || client->closing()) cooling_ = false;
  }
  start_handlers();
  hand_over_batch_if_closing();
}

void SubscriptionCore::pause() {
  // Closing: the client drains what is held (drain_held) and has paused the adapter itself.
  if (auto client = client_.lock(); client && client->closing()) return;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    delivery_paused_ = true;
  }
  asio::post(shared_->strand, [self = shared_from_this()] {
    self->user_paused_ = true;
    self->apply_flow();
    self->touch_held();  // at once too: what waited behind a slow handler may be old already
  });
}

void SubscriptionCore::touch_held() {
  if (!(user_paused_ || cooling_strand_) || !active() || !adapter_ || !shared_->caps.touch) return;
  const auto interval = adapter_->held_touch_interval();
  if (interval.count() <= 0) return;
  std::vector<Message> held;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    // Resumed (or closing) already: handlers take these now, and ack them.
    if (!held_back()) return;
    // Those the handler thread took ahead and has not run yet wait too. One it has just begun
    // may be among them: touching it as well is harmless.
    const std::size_t handed =
        std::min(ahead_handed_.load(std::memory_order_relaxed), ahead_copies_.size());
    held.assign(ahead_copies_.begin() + static_cast<std::ptrdiff_t>(handed), ahead_copies_.end());
    held.insert(held.end(), queue_.begin(), queue_.end());
  }
  held.erase(
      std::remove_if(held.begin(), held.end(), [](const Message& m) { return m.responded(); }),
      held.end());
  if (!held.empty()) adapter_->touch_held(held);
  // A wait that had fired before its timer was reset or replaced still runs, with success: the
  // arming it belongs to tells it apart.
  touch_timer_ = std::make_unique<ClockTimer>(shared_->strand, shared_->clock);
  touch_timer_->expires_after(interval);
  touch_timer_->async_wait([weak = weak_from_this(), arming = ++touch_arming_](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->touch_arming_ != arming) return;  // cancelled or replaced
    self->touch_held();
  });
}

void SubscriptionCore::stop_touching() {
  ++touch_arming_;
  touch_timer_.reset();  // cancels it
}

void SubscriptionCore::resume() {
  drain_held();
  asio::post(shared_->strand, [self = shared_from_this()] {
    self->stop_touching();
    self->user_paused_ = false;
    self->apply_flow();
  });
}

void SubscriptionCore::set_max_in_flight(std::uint32_t n) {
  max_in_flight_.store(n);
  asio::post(shared_->strand, [self = shared_from_this(), n] {
    if (self->adapter_) self->adapter_->set_max_in_flight(n);
  });
}

}  // namespace polybus::detail
