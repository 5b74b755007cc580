// SPDX-License-Identifier: Apache-2.0
// subscribe_batch: messages join a batch on their handler threads; a batch runs once it is full,
// once its wait is over, once the broker's credit is all in hand, or when the client closes.
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/error.hpp"

namespace polybus::detail {

bool SubscriptionCore::credit_used_up() const {
  // Where answers give the broker its credit back (NSQ's RDY, mem's credit), every message the
  // subscription may have unanswered is in hand: nothing more comes until the batch is answered.
  if (!shared_->caps.ack) return false;
  const std::uint64_t received = cells_->received.load(std::memory_order_relaxed);
  const std::uint64_t answered = cells_->acked.load(std::memory_order_relaxed) +
                                 cells_->nacked.load(std::memory_order_relaxed) +
                                 cells_->settled.load(std::memory_order_relaxed);
  const std::uint64_t in_flight = received > answered ? received - answered : 0;
  if (in_flight < max_in_flight_.load()) return false;
  std::lock_guard<BriefMutex> lock(mutex_);
  return queue_.empty();  // what is queued joins this batch first
}

void SubscriptionCore::join_batch(Message& message) {
  joined_batch_ = true;
  std::vector<Message> full;
  std::uint64_t arm = 0;    // the generation of a batch this message began
  Clock::time_point due{};  // max_wait after it began, on the client's clock
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    batch_.push_back(message);
    batch_held_.store(batch_.size());
    if (batch_.size() == 1) {
      arm = ++batch_generation_;
      due = shared_->now() + batch_options_.max_wait;
    }
    auto client = client_.lock();
    const bool closing = !client || client->closing();
    if (batch_.size() >= batch_options_.max_messages || credit_used_up() || (closing && [&] {
          std::lock_guard<BriefMutex> queue_lock(mutex_);
          return queue_.empty();
        }())) {
      full.swap(batch_);
      batch_held_.store(0);
      ++batch_generation_;  // its timer, if armed, finds another generation
      ++batch_running_;
      arm = 0;
    }
  }
  if (arm)
    asio::post(shared_->strand, [self = shared_from_this(), arm, due] {
      if (!self->batch_timer_)
        self->batch_timer_ =
            std::make_unique<ClockTimer>(self->shared_->strand, self->shared_->clock);
      self->batch_timer_->expires_at(due);
      self->batch_timer_->async_wait([weak = self->weak_from_this(), arm](std::error_code ec) {
        if (auto me = weak.lock(); me && !ec) me->batch_due(arm);
      });
    });
  if (!full.empty()) {
    run_batch(std::move(full));
    --batch_running_;
  }
}

void SubscriptionCore::batch_due(std::uint64_t generation) {
  std::vector<Message> due;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    if (generation != batch_generation_ || batch_.empty()) return;
    due.swap(batch_);
    batch_held_.store(0);
    ++batch_generation_;
    ++batch_running_;
  }
  run_batch_elsewhere(std::move(due));
}

void SubscriptionCore::hand_over_batch_if_closing() {
  if (!batch_handler_) return;
  std::uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    generation = batch_generation_;
  }
  asio::post(shared_->strand, [self = shared_from_this(), generation] {
    auto client = self->client_.lock();
    if (!client || client->closing()) self->batch_due(generation);
  });
}

void SubscriptionCore::run_batch_elsewhere(std::vector<Message> messages) {
  auto run = [self = shared_from_this(), messages = std::move(messages)]() mutable {
    self->run_batch(std::move(messages));
    DroppedHandlers dropped;  // the last batch to return lets go of them, once asked to
    bool last = false;
    {
      std::lock_guard<BriefMutex> lock(self->mutex_);
      last = --self->batch_running_ == 0;
      if (last) self->take_handlers_if_idle(dropped);
    }
    if (last && !self->batch_held_.load()) {
      auto client = self->client_.lock();
      if (client && client->closing())
        asio::post(self->shared_->strand, [client] { client->check_drain(); });
    }
  };
  if (on_io_thread_)
    asio::post(shared_->strand, std::move(run));
  else
    pool_->post(std::move(run));
}

void SubscriptionCore::run_batch(std::vector<Message> messages) {
  bump(cells_->batches);
  bump(cells_->batched_messages, messages.size());
  Batch batch(std::move(messages));
  const auto started = Clock::now();
  bool failed = false;
  std::string failure;
  try {
    if (active_.load()) {
      batch_handler_(batch);
    } else {
      for (auto& message : batch) release(message);
      return;
    }
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "a non-standard exception";
  }
  cells_->handler_time.observe(Clock::now() - started);
  const bool ack = shared_->caps.ack;
  if (failed)
    shared_->emit_error(make_error_code(errc::handler_failed), topic_ + ": batch handler threw (" +
                                                                   std::to_string(batch.size()) +
                                                                   " messages): " + failure);
  for (auto& message : batch) {
    if (detail::state_of(message)->manual.load() || message.responded()) {
      if (!ack) bump(cells_->settled);
      continue;
    }
    if (!failed) {
      if (ack)
        message.ack();
      else
        bump(cells_->settled);
    } else if (handle_failure(message, failure) && !ack) {
      bump(cells_->settled);
    }
  }
}

}  // namespace polybus::detail
