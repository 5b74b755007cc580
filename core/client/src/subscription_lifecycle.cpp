// SPDX-License-Identifier: Apache-2.0
// A subscription's life: the broker's confirmation or refusal (and waits on it), its end, and
// unsubscribing: handlers stop taking messages, what is held goes back, the handlers go.
#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/error.hpp"

namespace polybus::detail {

namespace {
constexpr const char* kClientGone = "the client is gone (its Client was dropped)";

// What a call completes with once its client is gone: at once, on the calling thread, and what
// it throws goes nowhere (no error callback is left to tell).
template <typename Done>
void complete_without_client(const Done& done, const Status& status) {
  if (!done) return;
  try {
    done(status);
  } catch (...) {
  }
}
}  // namespace

void SubscriptionCore::ready(std::error_code ec, const std::string& detail) {
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    if (ready_result_) return;
    ready_result_ = Status(ec, detail);
  }
  ready_cv_.notify_all();
  for (auto& waiter : std::exchange(ready_waiters_, {})) {
    waiter->timer.cancel();
    shared_->complete("wait_ready", std::exchange(waiter->done, nullptr), Status(ec, detail));
  }
  if (on_settled_) on_settled_(Status(ec, detail), false);
  // Closing the client is the application's own doing, not an error to report.
  if (ec && ec != make_error_code(errc::closed))
    shared_->emit_error(ec, topic_ + ": subscription refused: " + detail);
}

void SubscriptionCore::ended(std::error_code ec, const std::string& detail) {
  // Told once: an end before the confirmation is a refusal, which ready() reports (below, or
  // already when the adapter said it first); only an end after the confirmation is said here.
  const std::optional<Status> before = ready_result();
  deactivate();  // first: whoever wait_ready() wakes sees the subscription inactive
  ready(ec ? ec : make_error_code(errc::closed), detail);
  settle_end(Status(ec ? ec : make_error_code(errc::closed), detail));
  if (ec && ec != make_error_code(errc::closed) && before && !*before)
    shared_->emit_error(ec, topic_ + ": subscription ended: " + detail);
}

void SubscriptionCore::settle_end(const Status& why) {
  if (auto settled = std::move(on_settled_)) {
    on_settled_ = nullptr;
    settled(why, true);
  }
}

Status SubscriptionCore::wait_ready(std::chrono::milliseconds timeout) {
  std::unique_lock<BriefMutex> lock(mutex_);
  if (ready_result_) return *ready_result_;
  // Confirmed on the strand: waited for on a thread of its io_context, it could only time out.
  if (on_io_context())
    return Status(errc::would_block_io_thread,
                  topic_ +
                      ": wait_ready on a thread that runs the client's io_context (its io thread, "
                      "or a thread of the application's ConnectOptions::io_context) waits for "
                      "nothing: the confirmation needs that thread");
  if (ready_cv_.wait_for(lock, timeout, [&] { return ready_result_.has_value(); }))
    return *ready_result_;
  lock.unlock();
  return Status(errc::timeout, not_ready_within(timeout));
}

std::string SubscriptionCore::not_ready_within(std::chrono::milliseconds timeout) const {
  // With no connection up, why: the last connection's end ("connection refused", ...).
  const std::string what = topic_ + ": the subscription was not confirmed within " +
                           std::to_string(timeout.count()) + "ms";
  return shared_->connectivity.explain(what);
}

void SubscriptionCore::wait_ready(std::chrono::milliseconds timeout, Completion done) {
  // With the client gone no strand is left to run it: answered at once on this thread, as a
  // ClientRef's calls are then.
  if (client_.expired()) {
    std::optional<Status> result;
    {
      std::lock_guard<BriefMutex> lock(mutex_);
      result = ready_result_;
    }
    return complete_without_client(
        done, result.value_or(Status(errc::closed, topic_ + ": " + kClientGone)));
  }
  asio::post(
      shared_->strand, [self = shared_from_this(), timeout, done = std::move(done)]() mutable {
        std::optional<Status> result;
        {
          std::lock_guard<BriefMutex> lock(self->mutex_);
          result = self->ready_result_;
        }
        if (result) return self->shared_->complete("wait_ready", done, *result);
        auto waiter = std::make_shared<ReadyWaiter>(self->shared_->strand, self->shared_->clock);
        waiter->done = std::move(done);
        waiter->timer.expires_after(timeout);
        self->ready_waiters_.push_back(waiter);
        // Holds the subscription for the deadline at most: ready() cancels it first.
        waiter->timer.async_wait([self, waiter, timeout](std::error_code) {
          if (!waiter->done) return;  // ready() answered it
          auto& waiters = self->ready_waiters_;
          waiters.erase(std::remove(waiters.begin(), waiters.end(), waiter), waiters.end());
          self->shared_->complete("wait_ready", std::exchange(waiter->done, nullptr),
                                  Status(errc::timeout, self->not_ready_within(timeout)));
        });
      });
}

void SubscriptionCore::deactivate() {
  active_.store(false);
  stop_touching();
  // Strand: what waits for an in-place retry will not get it.
  for (auto& retry : retries_) {
    shared_->emit_error(make_error_code(errc::closed),
                        topic_ + ": message " + retry.message.id() +
                            " dropped before its retry: the subscription ended (" + retry.reason +
                            ")");
    bump(cells_->settled);
  }
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    retry_bytes_ = 0;
    retries_waiting_ -= retries_.size();
  }
  retries_.clear();  // cancels their timers
  Fifo<Message> left;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    if (running_ == 0) {
      left = std::move(queue_);  // otherwise the running loop releases them
      held_bytes_ = 0;
    }
  }
  for (auto& message : left) release(message);
  std::vector<Message> batch;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    batch.swap(batch_);
    batch_held_.store(0);
    ++batch_generation_;
  }
  for (auto& message : batch) release(message);
  if (batch_timer_) batch_timer_->cancel();
  if (cooling_timer_) cooling_timer_->cancel();
}

void SubscriptionCore::drop_handlers() {
  // Destroyed outside the lock: a handler's captures may hold the last Subscription handle of
  // this very subscription.
  DroppedHandlers dropped;
  DiscardCallback discard;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    drop_when_idle_ = true;
    take_handlers_if_idle(dropped);
    if (running_ == 0) discard.swap(on_discard_);
  }
}

void SubscriptionCore::drop_handlers_when_idle() {
  DroppedHandlers dropped;
  std::lock_guard<BriefMutex> lock(mutex_);
  drop_when_idle_ = true;
  take_handlers_if_idle(dropped);
}

void SubscriptionCore::take_handlers_if_idle(DroppedHandlers& into) {
  // The subscription is inactive by now: no handler starts again, and a batch handed to a
  // thread before it went inactive was counted in batch_running_ first. Whatever still runs
  // drops them as it returns (run_queue, run_batch_elsewhere): a handler holding its own
  // Subscription must not keep the subscription, and its handler threads, for ever.
  if (!drop_when_idle_ || running_ > 0) return;
  into.handler.swap(handler_);
  into.serve.swap(serve_handler_);
  if (batch_running_.load() > 0) return;
  into.batch.swap(batch_handler_);
  drop_when_idle_ = false;
}

void SubscriptionCore::unsubscribe(std::function<void(const Status&)> done) {
  active_.store(false);
  auto client = client_.lock();
  if (!client)
    return complete_without_client(done, Status(errc::closed, topic_ + ": " + kClientGone));
  client->post_in_order([client, self = shared_from_this(), done = std::move(done)]() mutable {
    client->unsubscribe(self, std::move(done));
  });
}

void SubscriptionCore::start_handlers() {
  std::uint32_t start = 0;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    if (held_back() && active_.load()) return;
    start = static_cast<std::uint32_t>(
        std::min<std::size_t>(concurrency_ - std::min(concurrency_, running_), queue_.size()));
    running_ += start;
  }
  for (std::uint32_t i = 0; i < start; ++i) post_run_queue();
}

}  // namespace polybus::detail
