// SPDX-License-Identifier: Apache-2.0
// Asio completion tokens for the client's asynchronous operations, for applications that use Asio:
//
//   Status s = co_await polybus::async_publish(client, "t", "hello", asio::use_awaitable);
//   std::future<polybus::Reply> f = polybus::async_request(client, "q", "ping", asio::use_future);
//   auto op = polybus::async_close(client, std::chrono::seconds(5), asio::experimental::deferred);
//
// Built with asio::async_initiate over Client's callback API (which stays): any token works
// (a callback, use_future, deferred (asio::experimental::deferred in Asio 1.22, Debian 12),
// use_awaitable, bind_executor...). Completions carry the
// same values as the callbacks, and never throw: publish and close give a polybus::Status (its
// cause included), request a polybus::Reply. A handler runs on its associated executor (the
// coroutine's, the one bound with bind_executor), whose work is kept alive until then; a handler
// with none runs on the client's io thread, as a plain callback does.
//
// Lifetime: the client's io thread posts completions into the application's io_context, so that
// io_context must outlive the client (declare it first; destroying the Client joins the client's
// io thread). An operation holds a ClientRef, never the client: one started after its Client
// went completes with errc::closed.
//
// This header includes Asio; polybus/polybus.hpp does not.
#pragma once

#include "polybus/export.hpp"

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "polybus/client.hpp"

namespace polybus {
namespace detail {

// A Client callback (a std::function, hence copyable) that hands its result to an Asio
// completion handler (often move-only) on the handler's associated executor.
template <typename Result, typename Handler>
auto completion_for(Handler&& handler) {
  using HandlerType = std::decay_t<Handler>;
  using Guard = decltype(asio::make_work_guard(asio::get_associated_executor(handler)));
  struct Held {
    HandlerType handler;
    Guard guard;
  };
  auto guard = asio::make_work_guard(asio::get_associated_executor(handler));
  auto held = std::make_shared<Held>(Held{std::forward<Handler>(handler), std::move(guard)});
  return [held](Result result) {
    auto executor = held->guard.get_executor();
    asio::dispatch(executor, [held, value = std::decay_t<Result>(result)]() mutable {
      auto run = std::move(held->handler);
      std::move(run)(std::move(value));
    });
    // The work is let go once dispatch() has returned, not by the handler, so the
    // application's run() does not return while this thread is still inside the post that
    // woke it. (Its io_context must still outlive the client: see the top of this file.)
    held->guard.reset();
  };
}

struct POLYBUS_API InitiatePublish {
  template <typename Handler>
  void operator()(Handler&& handler, ClientRef client, const std::string& topic,
                  std::string payload, PublishOptions options) const {
    client.publish(topic, std::move(payload),
                   completion_for<const Status&>(std::forward<Handler>(handler)), options);
  }
};

struct POLYBUS_API InitiateRequest {
  template <typename Handler>
  void operator()(Handler&& handler, ClientRef client, const std::string& topic,
                  std::string payload, std::chrono::milliseconds timeout) const {
    client.request(topic, std::move(payload), completion_for<Reply>(std::forward<Handler>(handler)),
                   timeout);
  }
};

struct POLYBUS_API InitiateClose {
  template <typename Handler>
  void operator()(Handler&& handler, ClientRef client, std::chrono::milliseconds timeout) const {
    client.close(timeout, completion_for<const Status&>(std::forward<Handler>(handler)));
  }
};

}  // namespace detail

/// Client::publish() for an Asio completion token: completes with the publish's Status (success
/// once the broker accepted it where the scheme confirms; see Capabilities::publish_confirmed).
template <typename CompletionToken>
auto async_publish(const ClientRef& client, std::string_view topic, std::string payload,
                   PublishOptions options, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Status)>(
      detail::InitiatePublish{}, token, client, std::string(topic), std::move(payload), options);
}

/// async_publish() with the default PublishOptions.
template <typename CompletionToken>
auto async_publish(const ClientRef& client, std::string_view topic, std::string payload,
                   CompletionToken&& token) {
  return async_publish(client, topic, std::move(payload), PublishOptions{},
                       std::forward<CompletionToken>(token));
}

/// Client::request() for an Asio completion token: completes with the Reply (its ec and detail
/// say why when it failed). A timeout of 0 is the op_timeout option.
template <typename CompletionToken>
auto async_request(const ClientRef& client, std::string_view topic, std::string payload,
                   std::chrono::milliseconds timeout, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Reply)>(
      detail::InitiateRequest{}, token, client, std::string(topic), std::move(payload), timeout);
}

/// async_request() with the op_timeout option as the deadline.
template <typename CompletionToken>
auto async_request(const ClientRef& client, std::string_view topic, std::string payload,
                   CompletionToken&& token) {
  return async_request(client, topic, std::move(payload), std::chrono::milliseconds(0),
                       std::forward<CompletionToken>(token));
}

/// Drains and closes (as Client::close); completes with what the deadline cut off, if anything.
template <typename CompletionToken>
auto async_close(const ClientRef& client, std::chrono::milliseconds timeout,
                 CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Status)>(detail::InitiateClose{}, token, client,
                                                             timeout);
}

}  // namespace polybus
