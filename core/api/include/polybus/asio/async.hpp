// SPDX-License-Identifier: Apache-2.0
// Asio completion tokens for every asynchronous operation of the client, with per-operation
// cancellation, for applications that use Asio:
//
//   Status s = co_await polybus::async_publish(client, "t", "hello", asio::use_awaitable);
//   std::future<polybus::Reply> f = polybus::async_request(client, "q", "ping", asio::use_future);
//   auto [status, message] = co_await polybus::async_receive(pull, asio::use_awaitable);
//
// Built with asio::async_initiate over the callback API (which stays): any token works (a
// callback, use_future, deferred (asio::experimental::deferred in Asio 1.22, Debian 12),
// use_awaitable, bind_executor, bind_cancellation_slot...). Each operation has the shape of its
// callback form: what it acts on, its data, its options (a deadline is one), then the token.
// Completions carry the same values as the callbacks, and never throw: a Status (its cause
// included), or a Reply, or a Status and a Message. A handler runs on its associated executor
// (the coroutine's, the one bound with bind_executor), whose work is kept alive until then; a
// handler with none runs on the client's io thread, as a plain callback does.
//
// Cancellation: a handler's associated cancellation slot (a coroutine's, a parallel_group's,
// awaitable operators' `||`, bind_cancellation_slot) cancels the operation. A terminal or partial
// cancellation completes it at once, on the handler's executor, with errc::canceled and a cause
// that says what became of the work: a request is let go by the client too (through a
// Cancellation: a close does not wait for it), unsent if it had not left yet, else its late reply
// is dropped; a publish already handed to the client may still reach the broker, and a close
// drains it as any other; a flush, a wait_ready, an unsubscribe or a close goes on in the
// background; a receive gives up its place, and a message is never lost to it (one already on its
// way completes the receive instead). The handler and the work on its executor are let go then.
// Cancellation of type `total` (no side effects at all) is not supported: it is ignored.
//
// Lifetime: the client's io thread posts completions into the application's io_context, so that
// io_context must outlive the client (declare it first; destroying the Client joins the client's
// io thread). An operation holds a ClientRef, never the client: one started after its Client
// went completes with errc::closed.
//
// This header includes Asio; polybus/polybus.hpp does not.
#pragma once

#include "polybus/export.hpp"

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "polybus/client.hpp"
#include "polybus/pull_subscription.hpp"

namespace polybus {
namespace detail {

// One operation's Asio handler, completed once: by the client's callback (on whatever thread it
// runs) or by a cancellation (on the handler's executor, where Asio emits it), whichever decides
// first. The one that decides takes the handler and the work guard under the lock, so the other
// never touches the application's executor after its work was let go.
template <typename Handler, typename... Values>
class AsyncOperation : public std::enable_shared_from_this<AsyncOperation<Handler, Values...>> {
 public:
  using Executor = asio::associated_executor_t<Handler>;
  using Slot = asio::associated_cancellation_slot_t<Handler>;

  explicit AsyncOperation(Handler&& handler)
      : handler_(std::move(handler)),
        guard_(asio::make_work_guard(asio::get_associated_executor(*handler_))),
        slot_(asio::get_associated_cancellation_slot(*handler_)) {}

  // The initiating function runs on this thread until the returned guard goes: a completion
  // the client gives meanwhile (at once, on this thread) is posted, never run inside it.
  auto initiating() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      initiating_ = std::this_thread::get_id();
    }
    struct Done {
      AsyncOperation* op;
      ~Done() {
        std::lock_guard<std::mutex> lock(op->mutex_);
        op->initiating_ = std::thread::id();
      }
    };
    return Done{this};
  }

  // With the client's outcome, from the client's thread: on the handler's executor, at once
  // when that is this thread (or the handler has none: the client's io thread runs it).
  void complete(Values... values) {
    bool inside_initiation = false;
    auto taken = take(&inside_initiation);
    if (!taken) return;
    auto executor = taken->second.get_executor();
    auto run = [self = this->shared_from_this(), handler = std::move(taken->first),
                values...]() mutable {
      self->clear_slot();
      std::move(handler)(std::move(values)...);
    };
    if (inside_initiation)
      asio::post(executor, std::move(run));
    else
      asio::dispatch(executor, std::move(run));
    // Let go once dispatch() returned, not by the handler: the application's run() must not
    // return while this thread is still inside the post that woke it.
    taken->second.reset();
  }

  // From the cancellation slot, on the handler's executor: completes with `values` (posted,
  // never from inside the emit) unless the client's outcome came first. `before` runs once the
  // cancellation has won, with the lock released (a receive gives up its place there).
  template <typename Before>
  void cancel(Before before, Values... values) {
    auto taken = take();
    if (!taken) return;
    before();
    auto executor = taken->second.get_executor();
    asio::post(executor, [self = this->shared_from_this(), handler = std::move(taken->first),
                          values...]() mutable {
      self->clear_slot();
      std::move(handler)(std::move(values)...);
    });
    taken->second.reset();
  }

  // The handler has a cancellation slot.
  bool cancellable() const { return slot_.is_connected(); }

  // On the handler's executor, before the handler runs: the slot is free for the next
  // operation. Not for a handler without an executor of its own: it runs on the client's io
  // thread, where clearing would race an emit from whatever thread the application emits on
  // (Asio's slots are not thread-safe); the handler left in the slot finds the operation done
  // and does nothing, and the next operation on the slot replaces it.
  void clear_slot() {
    if constexpr (!std::is_same_v<Executor, asio::system_executor>) {
      if (slot_.is_connected()) slot_.clear();
    }
  }

  // Installs `on_cancel` (called with the cancellation's type) in the handler's slot, if it has
  // one. Before the client hears of the operation: Asio emits on the handler's executor.
  template <typename OnCancel>
  void on_cancellation(OnCancel on_cancel) {
    if (!slot_.is_connected()) return;
    slot_.assign([weak = this->weak_from_this(), on_cancel](asio::cancellation_type type) mutable {
      constexpr auto handled = asio::cancellation_type::terminal | asio::cancellation_type::partial;
      if ((type & handled) == asio::cancellation_type::none) return;
      if (auto self = weak.lock()) on_cancel(*self);
    });
  }

 private:
  using Guard = asio::executor_work_guard<Executor>;
  std::optional<std::pair<Handler, Guard>> take(bool* inside_initiation = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handler_) return std::nullopt;
    if (inside_initiation) *inside_initiation = initiating_ == std::this_thread::get_id();
    std::optional<std::pair<Handler, Guard>> taken;
    taken.emplace(std::move(*handler_), std::move(*guard_));
    handler_.reset();
    guard_.reset();
    return taken;
  }

  std::mutex mutex_;
  std::thread::id initiating_;  // guarded by mutex_
  std::optional<Handler> handler_;
  std::optional<Guard> guard_;
  Slot slot_;
};

template <typename... Values, typename Handler>
auto make_operation(Handler&& handler) {
  return std::make_shared<AsyncOperation<std::decay_t<Handler>, Values...>>(
      std::forward<Handler>(handler));
}

// The cause a cancelled operation completes with.
inline Status cancelled(std::string what) {
  return Status(errc::canceled, std::move(what));
}

// An initiation whose operation completes with a Status: `start` gets the client's callback.
template <typename Start>
struct InitiateStatus {
  template <typename Handler>
  void operator()(Handler&& handler, Start start, const std::string& on_cancel) const {
    auto op = make_operation<Status>(std::forward<Handler>(handler));
    op->on_cancellation([on_cancel](auto& self) { self.cancel([] {}, cancelled(on_cancel)); });
    auto initiating = op->initiating();
    start([op](const Status& status) { op->complete(status); });
  }
};

template <typename Start>
auto initiate_status(Start) {
  return InitiateStatus<Start>{};
}

struct InitiateRequest {
  template <typename Handler>
  void operator()(Handler&& handler, ClientRef client, const std::string& topic,
                  std::string payload, RequestOptions options) const {
    auto op = make_operation<Reply>(std::forward<Handler>(handler));
    if (!options.cancellation && op->cancellable()) {
      // Cancelled in the client: the request is let go there too (a close does not wait for
      // it), and completes through the client with what became of it (sent or not).
      Cancellation cancellation;
      options.cancellation = cancellation;
      op->on_cancellation([cancellation](auto&) { cancellation.cancel(); });
    } else {
      // The caller's own Cancellation may cover other operations too: this one alone completes.
      op->on_cancellation([topic](auto& self) {
        const Status why = cancelled("request to " + topic +
                                     ": cancelled by the caller; it may still reach a responder, "
                                     "whose reply is dropped");
        self.cancel([] {}, Reply{why.code(), {}, why.cause(), {}});
      });
    }
    auto initiating = op->initiating();
    client.request(topic, std::move(payload), std::move(options),
                   [op](Reply reply) { op->complete(std::move(reply)); });
  }
};

struct InitiateReceive {
  template <typename Handler>
  void operator()(Handler&& handler, PullSubscription pull) const {
    auto op = make_operation<Status, Message>(std::forward<Handler>(handler));
    // The ticket is known before any cancellation can run: both run on the handler's executor
    // (Asio emits there), and this initiation does too.
    auto ticket = std::make_shared<std::uint64_t>(0);
    auto initiating = op->initiating();
    *ticket = pull.receive(
        [op](const Status& status, Message message) { op->complete(status, std::move(message)); });
    op->on_cancellation([pull, ticket](auto& self) {
      // Only if the receive was still waiting: a message already handed to it completes it.
      if (!pull.cancel_receive(*ticket)) return;
      self.cancel([] {}, cancelled("receive from " + pull.topic() + ": cancelled by the caller"),
                  Message{});
    });
  }
};

}  // namespace detail

/// ClientRef::publish() for an Asio completion token: completes with the publish's Status
/// (success once the broker accepted it where the scheme confirms; see
/// Capabilities::publish_confirmed).
template <typename CompletionToken>
auto async_publish(const ClientRef& client, std::string_view topic, std::string payload,
                   PublishOptions options, CompletionToken&& token) {
  auto start = [client, topic = std::string(topic), payload = std::move(payload),
                options = std::move(options)](Completion done) mutable {
    client.publish(topic, std::move(payload), std::move(options), std::move(done));
  };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, std::move(start),
      "publish to " + std::string(topic) +
          ": cancelled by the caller; it was handed to the client and may still reach the broker");
}

/// async_publish() with the default PublishOptions.
template <typename CompletionToken>
auto async_publish(const ClientRef& client, std::string_view topic, std::string payload,
                   CompletionToken&& token) {
  return async_publish(client, topic, std::move(payload), PublishOptions{},
                       std::forward<CompletionToken>(token));
}

/// ClientRef::publish_batch() for an Asio completion token.
template <typename CompletionToken>
auto async_publish_batch(const ClientRef& client, std::string_view topic,
                         std::vector<std::string> payloads, PublishOptions options,
                         CompletionToken&& token) {
  auto start = [client, topic = std::string(topic), payloads = std::move(payloads),
                options = std::move(options)](Completion done) mutable {
    client.publish_batch(topic, std::move(payloads), std::move(options), std::move(done));
  };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, std::move(start),
      "publish_batch to " + std::string(topic) +
          ": cancelled by the caller; it was handed to the client and may still reach the broker");
}

/// async_publish_batch() with the default PublishOptions.
template <typename CompletionToken>
auto async_publish_batch(const ClientRef& client, std::string_view topic,
                         std::vector<std::string> payloads, CompletionToken&& token) {
  return async_publish_batch(client, topic, std::move(payloads), PublishOptions{},
                             std::forward<CompletionToken>(token));
}

/// ClientRef::request() for an Asio completion token: completes with the Reply (its ec and
/// detail say why when it failed). A deadline converts to RequestOptions (`5s`).
template <typename CompletionToken>
auto async_request(const ClientRef& client, std::string_view topic, std::string payload,
                   RequestOptions options, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Reply)>(detail::InitiateRequest{}, token,
                                                            client, std::string(topic),
                                                            std::move(payload), std::move(options));
}

/// async_request() with the default RequestOptions (the op_timeout option, no headers).
template <typename CompletionToken>
auto async_request(const ClientRef& client, std::string_view topic, std::string payload,
                   CompletionToken&& token) {
  return async_request(client, topic, std::move(payload), RequestOptions{},
                       std::forward<CompletionToken>(token));
}

/// ClientRef::flush() for an Asio completion token.
template <typename CompletionToken>
auto async_flush(const ClientRef& client, std::chrono::milliseconds timeout,
                 CompletionToken&& token) {
  auto start = [client, timeout](Completion done) { client.flush(timeout, std::move(done)); };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start,
      std::string("flush: cancelled by the caller; the publishes it waited for go on"));
}

/// ClientRef::ping() for an Asio completion token.
template <typename CompletionToken>
auto async_ping(const ClientRef& client, std::chrono::milliseconds timeout,
                CompletionToken&& token) {
  auto start = [client, timeout](Completion done) { client.ping(timeout, std::move(done)); };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start, std::string("ping: cancelled by the caller"));
}

/// async_ping() with the op_timeout option as the deadline.
template <typename CompletionToken>
auto async_ping(const ClientRef& client, CompletionToken&& token) {
  return async_ping(client, std::chrono::milliseconds(0), std::forward<CompletionToken>(token));
}

/// Drains and closes (as ClientRef::close); completes with what the deadline cut off, if
/// anything. Cancelled, it completes at once and the close goes on.
template <typename CompletionToken>
auto async_close(const ClientRef& client, std::chrono::milliseconds timeout,
                 CompletionToken&& token) {
  auto start = [client, timeout](Completion done) { client.close(timeout, std::move(done)); };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start,
      std::string("close: cancelled by the caller; the close goes on in the background"));
}

/// async_close() with the close_timeout option as the deadline.
template <typename CompletionToken>
auto async_close(const ClientRef& client, CompletionToken&& token) {
  auto start = [client](Completion done) { client.close(std::move(done)); };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start,
      std::string("close: cancelled by the caller; the close goes on in the background"));
}

/// Subscription::wait_ready() without waiting, for an Asio completion token: the broker's
/// confirmation or refusal, or errc::timeout at the deadline.
template <typename CompletionToken>
auto async_wait_ready(const Subscription& subscription, std::chrono::milliseconds timeout,
                      CompletionToken&& token) {
  auto start = [subscription, timeout](Completion done) {
    subscription.wait_ready(timeout, std::move(done));
  };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start,
      std::string("wait_ready: cancelled by the caller; the subscription goes on"));
}

/// Subscription::unsubscribe() for an Asio completion token. Cancelled, it completes at once and
/// the unsubscribe goes on (delivery stopped when it started).
template <typename CompletionToken>
auto async_unsubscribe(Subscription subscription, CompletionToken&& token) {
  auto start = [subscription](Completion done) mutable {
    subscription.unsubscribe(std::move(done));
  };
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::initiate_status(start), token, start,
      std::string("unsubscribe: cancelled by the caller; the unsubscribe goes on"));
}

/// PullSubscription::receive() for an Asio completion token: completes with the next message
/// (the application settles it), or with the subscription's end and an empty Message.
template <typename CompletionToken>
auto async_receive(const PullSubscription& pull, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Status, Message)>(detail::InitiateReceive{},
                                                                      token, pull);
}

}  // namespace polybus
