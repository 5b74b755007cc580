// SPDX-License-Identifier: Apache-2.0
// Flush and close: waiting for what is in flight, the close sequence under its deadline (stop
// the intakes, drain the subscriptions, close the adapter, fail what is left with its cause), and
// what dropping the last Client does on each kind of thread.
#include <asio/detail/thread_context.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <future>
#include <utility>

#include "client_core.hpp"
#include "polybus/error.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

void ClientCore::flush(std::chrono::milliseconds timeout, Completion done) {
  const auto deadline = deadline_from(timeout, Clock::now());
  const auto limit = timeout.count() > 0 ? timeout : op_timeout_;
  struct Flush {
    Completion done;
    std::atomic<bool> completed{false};
    std::unique_ptr<asio::steady_timer> timer;  // strand
    std::uint64_t ticket = 0;
  };
  auto flush = std::make_shared<Flush>();
  flush->done = std::move(done);
  // Exactly once, on the strand, whichever comes first: the publishes or the deadline.
  auto finish = [shared = shared_, flush](Status status) {
    if (flush->completed.exchange(true)) return;
    asio::post(shared->strand, [shared, flush, status = std::move(status)] {
      if (flush->timer) flush->timer->cancel();
      shared->complete("flush", flush->done, status);
    });
  };
  flush->ticket = shared_->flush_epochs.wait([finish] { finish(Status{}); });
  if (flush->ticket == 0) return finish(Status{});
  asio::post(shared_->strand, [shared = shared_, flush, finish, deadline, limit] {
    if (flush->completed.load()) return;
    flush->timer = std::make_unique<asio::steady_timer>(shared->strand, deadline);
    flush->timer->async_wait([shared, flush, finish, limit](std::error_code ec) {
      std::uint64_t pending = 0;
      if (ec || !shared->flush_epochs.cancel(flush->ticket, pending)) return;
      finish(Status(errc::timeout, "flush: " + std::to_string(pending) +
                                       " publish(es) made before it still pending after " +
                                       std::to_string(limit.count()) + "ms"));
    });
  });
}

void ClientCore::close(std::chrono::milliseconds timeout, Completion done) {
  post_in_order([self = shared_from_this(), timeout, done = std::move(done)]() mutable {
    if (self->state_.load() == State::closed) {
      self->shared_->complete("close", done, Status{});
      return;
    }
    if (done) self->close_waiters_.push_back(std::move(done));
    if (self->state_.load() == State::closing) return self->bring_close_forward(timeout);
    self->state_.store(State::closing);
    self->close_deadline_ = Clock::now() + timeout;
    self->close_timeout_ = timeout;
    // Stop intake: no new messages reach handlers that will have to be drained.
    for (auto& sub : self->subscriptions_) {
      // The replies of requests still waiting are let in: the close waits for them.
      const auto& requests = self->topic_requests_;
      if (requests && requests->is_reply_subscription(sub.get())) continue;
      if (sub->adapter()) sub->adapter()->pause();
      sub->drain_held();
      sub->closing();
    }
    self->close_timer_ = std::make_unique<asio::steady_timer>(self->shared_->strand);
    self->close_timer_->expires_at(self->close_deadline_);
    // The wait holds the core: a close goes on to its end after the last handle let go (dropped
    // on a thread that could not wait for it). Replaced or cancelled, it lets go of it.
    self->close_timer_->async_wait([self](std::error_code ec) {
      if (!ec) self->finish_close(true);
    });
    self->check_drain();
  });
}

void ClientCore::bring_close_forward(std::chrono::milliseconds timeout) {
  // Each close is done by its own deadline: one with an earlier deadline than the close under
  // way moves the end of the drain forward. Once the adapter is closing, the drain is over.
  const auto deadline = Clock::now() + timeout;
  if (adapter_closing_ || !close_timer_ || deadline >= close_deadline_) return;
  close_deadline_ = deadline;
  close_timeout_ = timeout;
  close_timer_->expires_at(deadline);  // the earlier wait ends with operation_aborted
  close_timer_->async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->finish_close(true);
  });
}

void ClientCore::check_drain() {
  if (state_.load() != State::closing || adapter_closing_) return;
  if (ops_ && ops_->live() > 0) return;
  for (auto& sub : subscriptions_)
    if (!sub->idle()) return;
  // A handler that answered and returned before the close began: its ack or reply is queued
  // on the strand, ahead of this check posted again, and may start an operation (a reply over
  // topics) that the close must wait for.
  if (shared_->responses.waiting()) {
    asio::post(shared_->strand, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->check_drain();
    });
    return;
  }
  finish_close(false);
}

Status ClientCore::what_the_close_deadline_cut_off() const {
  const std::size_t operations = ops_ ? ops_->live() : 0;
  std::size_t messages = 0;
  for (const auto& sub : subscriptions_) messages += sub->pending();
  if (operations == 0 && messages == 0) return {};
  std::string cause =
      "close: its deadline (" + std::to_string(close_timeout_.count()) + "ms) passed with ";
  if (operations > 0)
    cause += std::to_string(operations) + " operation(s) unfinished (they fail with closed)";
  if (operations > 0 && messages > 0) cause += " and ";
  if (messages > 0)
    cause += std::to_string(messages) +
             " message(s) still being handled or waiting for a handler (not acknowledged: " +
             (shared_->caps.ack ? "the broker redelivers them)"
                                : "the protocol cannot redeliver "
                                  "them)");
  return Status(errc::timeout, std::move(cause));
}

void ClientCore::finish_close(bool deadline_passed) {
  if (adapter_closing_ || state_.load() != State::closing) return;
  adapter_closing_ = true;
  // What the deadline cut off is said in close's result, not dropped silently.
  const Status result = deadline_passed ? what_the_close_deadline_cut_off() : Status();
  // Cut off by the close, not by the connections the adapter is about to drop: each fails with
  // closed before the adapter's close can fail it as disconnected.
  if (ops_ && result)
    ops_->fail_all(make_error_code(errc::closed), "client closed: " + result.cause());
  // Give the adapter until the deadline (at least a moment) to close its connections.
  auto adapter_deadline = std::max(close_deadline_, Clock::now() + std::chrono::milliseconds(50));
  auto finished = std::make_shared<bool>(false);
  // Holds the core until it ran, as the close timer's wait did.
  auto complete = [self = shared_from_this(), finished, result] {
    if (*finished) return;
    *finished = true;
    if (self->ops_) self->ops_->fail_all(make_error_code(errc::closed), "client closed");
    for (auto& sub : self->subscriptions_) {
      sub->deactivate();
      sub->ended(make_error_code(errc::closed), "client closed");
      self->retire_metrics(*sub);
      sub->drop_handlers();
      sub->attach(nullptr);  // the adapter's side may hold the sink: break the cycle
    }
    self->subscriptions_.clear();
    self->state_.store(State::closed);
    self->close_timer_.reset();
    self->ops_->set_on_idle(nullptr);
    // Strand: the close is said done.
    struct Finish {
      std::shared_ptr<ClientCore> self;
      Status result;
      void operator()() {
        self->shared_->notify_state(StateEvent{ConnectionState::closed, {}, {}});
        self->shared_->closed.store(true);
        auto waiters = std::move(self->close_waiters_);
        for (auto& waiter : waiters) self->shared_->complete("close", waiter, result);
        self->adapter_.reset();
      }
    };
    Finish finish{self, result};
    // Said once no handler thread still holds the client (a job's captures go just after its
    // handler returned): an application may destroy its io_context when told, and the last
    // references then go on its thread, not on a pool thread racing that. Past the deadline a
    // handler that never returns must not hold the close: it is said at once.
    if (result) return finish();
    // Said once, on the strand: by the pool falling idle, or by the close's deadline, whichever
    // comes first. The drain counted the subscriptions the client still has; a handler of one
    // unsubscribed before the close (or a discarded message's on_discard) may still run, and
    // one that never returns must not hold the close past its deadline either.
    struct Saying {
      bool said = false;
      std::unique_ptr<asio::steady_timer> deadline;
    };
    auto saying = std::make_shared<Saying>();
    saying->deadline = std::make_unique<asio::steady_timer>(
        self->shared_->strand, std::max(self->close_deadline_, Clock::now()));
    saying->deadline->async_wait([saying, finish](std::error_code ec) mutable {
      if (ec || saying->said) return;
      saying->said = true;
      finish.result =
          Status(errc::timeout,
                 "close: its deadline (" + std::to_string(finish.self->close_timeout_.count()) +
                     "ms) passed with a handler still running on a handler thread (of a "
                     "subscription unsubscribed before the close, or an on_discard)");
      finish();
    });
    // The pool thread touches the io_context only; the strand is reached from an io thread, and
    // what holds the client travels in `finish`. Until then the io_context has work: a client
    // whose last handle went has let its own io thread run out, which would otherwise return
    // before this post and leave the close unsaid. That count travels with the post too, so it
    // is given back on the io thread after `finish`, never on the pool thread.
    auto io = self->shared_->strand.get_inner_executor();
    auto held = asio::prefer(io, asio::execution::outstanding_work.tracked);
    self->pool_->when_idle(
        [io, held = std::move(held), finish = std::move(finish), saying]() mutable {
          asio::post(io, [held = std::move(held), finish = std::move(finish), saying]() mutable {
            auto& strand = finish.self->shared_->strand;
            asio::dispatch(strand, [finish = std::move(finish), saying]() mutable {
              if (saying->said) return;
              saying->said = true;
              saying->deadline->cancel();  // lets go of what its wait holds at once
              finish();
            });
          });
        });
  };
  close_timer_->expires_at(adapter_deadline);
  close_timer_->async_wait([complete](std::error_code ec) {
    if (!ec) complete();
  });
  adapter_->close(adapter_deadline,
                  [complete, strand = shared_->strand] { asio::post(strand, complete); });
}

ClientHandle::~ClientHandle() {
  if (!core) return;
  // What the close may take, and a margin for the adapter's last step (finish_close gives it at
  // least 50 ms) and the io thread's exit: no fixed extra seconds.
  constexpr auto kMargin = std::chrono::milliseconds(200);
  const auto deadline = Clock::now() + close_timeout + kMargin;
  // Any event loop, not only the client's: waiting there would stall every other thing it runs.
  const bool on_an_event_loop = asio::detail::thread_context::top_of_thread_call_stack() != nullptr;
  const bool must_not_wait = on_io_context() || on_handler_thread() || on_an_event_loop ||
                             (!runtime->own && runtime->io->stopped());
  if (!core->closed()) {
    if (must_not_wait) {
      core->close(close_timeout, {});
    } else {
      // Shared with the completion, which may run after this frame is gone.
      auto closed = std::make_shared<std::promise<void>>();
      auto done = closed->get_future();
      core->close(close_timeout, [closed](const Status&) { closed->set_value(); });
      done.wait_until(deadline);
    }
  }
  core.reset();
  if (must_not_wait)
    runtime->let_go();
  else
    runtime->finish(deadline);
}

}  // namespace polybus::detail
