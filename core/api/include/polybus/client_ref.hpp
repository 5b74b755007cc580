// SPDX-License-Identifier: Apache-2.0
// A reference to a polybus client that does not keep it alive, with every operation of the
// client: what callbacks hold (polybus/client.hpp has the owning Client and connect()).
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "polybus/cancellation.hpp"
#include "polybus/capabilities.hpp"
#include "polybus/events.hpp"
#include "polybus/headers.hpp"
#include "polybus/message.hpp"
#include "polybus/metrics.hpp"
#include "polybus/status.hpp"

namespace polybus {

class Subscription;
struct SubscribeOptions;
struct BatchOptions;
class Batch;
class PullSubscription;

namespace detail {
class ClientHandle;
}  // namespace detail

/// Completes with success or a failure and its cause. [](std::error_code ec) {...} also fits.
using Completion = std::function<void(const Status&)>;

/// The outcome of a request: the reply's payload, or why there is none.
struct POLYBUS_API Reply {
  /// Empty on success; else why the request failed (timeout, no_responder, handler_failed, ...).
  std::error_code ec;
  std::string payload;  ///< the reply's payload, when ec is empty
  std::string detail;   ///< the broker's or responder's error text, when ec is set
  Headers headers;      ///< the reply envelope's attributes (envelope=cloudevents)
  /// ec and detail as a Status.
  Status status() const { return {ec, detail}; }
};
/// Completes a request with its Reply.
using ReplyCompletion = std::function<void(Reply)>;

/// How one publish goes.
struct POLYBUS_API PublishOptions {
  std::chrono::milliseconds timeout{0};  ///< 0: the client's op_timeout option
  std::chrono::milliseconds defer{0};  ///< deferred publish; needs capabilities().deferred_publish
  /// Travel in the envelope (envelope=cloudevents); with the envelope off a publish with headers
  /// fails with not_supported. Names are CloudEvents attribute names (a-z, 0-9, at most 20);
  /// id, source, type, time, subject, dataschema and datacontenttype set those attributes.
  Headers headers;
};

/// How one request goes. A deadline converts to one (`request(t, p, done, 5s)`), and `{}` is
/// the defaults.
struct POLYBUS_API RequestOptions {
  /// The defaults: the op_timeout option, no headers.
  RequestOptions() = default;
  /// This deadline, any std::chrono::duration rounded up to milliseconds (0: the client's
  /// op_timeout option), and these headers.
  template <typename Rep, typename Period>
  RequestOptions(std::chrono::duration<Rep, Period> deadline, Headers with = {})  // NOLINT
      : timeout(std::chrono::ceil<std::chrono::milliseconds>(deadline)), headers(std::move(with)) {}
  std::chrono::milliseconds timeout{0};  ///< 0: the client's op_timeout option
  Headers headers;                       ///< as PublishOptions::headers
  /// Gives the request up when it is cancelled: it completes at once with errc::canceled.
  std::optional<Cancellation> cancellation;
};

/// A subscribe() handler: returning acks the message, throwing nacks it (unless it answered the
/// message itself or took manual control).
using MessageHandler = std::function<void(Message&)>;
/// A serve() handler returns the reply payload; throwing sends an error reply (handler_failed).
using ServeHandler = std::function<std::string(Message&)>;
/// A subscribe_batch() handler: returning acks what it did not answer, throwing fails them all.
using BatchHandler = std::function<void(Batch&)>;

/// A reference to a client that does not keep it alive: what a handler, a completion or a
/// DeadLetter holds, so that no callback owns the client it belongs to. Cheap to copy; a Client
/// converts to one (`ClientRef ref = client;`), and Message::client() gives the one of the client
/// that delivered the message. Once its Client is gone (dropped or moved from), a call through it
/// fails with errc::closed: a completion runs at once on the calling thread, a blocking call
/// returns it, subscribe() and serve() and the queries (scheme(), capabilities(), stats(), ...)
/// throw polybus::Error(errc::closed).
class POLYBUS_API ClientRef {
 public:
  /// Names no client: every call fails with errc::closed.
  ClientRef() noexcept = default;
  /// Refers to what `other` refers to, never owning it (from a Client too).
  ClientRef(const ClientRef& other) noexcept : weak_(other.weak_) {}
  /// Refers to what `other` refers to, never owning it.
  ClientRef& operator=(const ClientRef& other) noexcept {
    weak_ = other.weak_;
    return *this;
  }
  ~ClientRef() = default;
  /// Made by the client (Message::client()); the handle is internal.
  explicit ClientRef(std::weak_ptr<detail::ClientHandle> handle) noexcept
      : weak_(std::move(handle)) {}

  /// Its Client is gone (or it never named one): every call fails with errc::closed.
  bool expired() const noexcept;
  /// It never named a client (default-constructed), as opposed to one whose Client is gone.
  bool empty() const noexcept;
  /// Not expired().
  explicit operator bool() const noexcept { return !expired(); }

  /// The URL's scheme, e.g. "nsq".
  std::string scheme() const;
  /// What this client can do: the scheme's capabilities, with request/reply over topics where
  /// the envelope (envelope=cloudevents) carries it for a protocol that has none.
  Capabilities capabilities() const;
  /// Publishes carry headers: the envelope is on (envelope=cloudevents).
  bool carries_headers() const;

  // Every operation reads the same way: what it acts on, its data, its options (a deadline is
  // one), then its completion; the form without options takes the defaults.

  /// Publishes `payload` to `topic`; `done` (which may be empty) runs once with the outcome, on
  /// the strand. Fails with errc::closed, errc::not_supported (a defer or headers this client
  /// cannot carry), errc::limit_exceeded (max_outgoing_bytes) or errc::timeout at the deadline.
  void publish(std::string_view topic, std::string payload, PublishOptions options,
               Completion done) const;
  /// publish() with the default PublishOptions.
  void publish(std::string_view topic, std::string payload, Completion done) const;
  /// Publishes every payload to `topic` in one protocol operation; `done` runs once for all of
  /// them. Needs capabilities().batch_publish (else errc::not_supported); an empty batch fails
  /// with errc::invalid_argument.
  void publish_batch(std::string_view topic, std::vector<std::string> payloads,
                     PublishOptions options, Completion done) const;
  /// publish_batch() with the default PublishOptions.
  void publish_batch(std::string_view topic, std::vector<std::string> payloads,
                     Completion done) const;
  /// Blocks until the broker accepted the message or the deadline passed. On a thread that runs
  /// the client's io_context (a completion, an Asio handler of the application's io_context) it
  /// does not wait: errc::would_block_io_thread, and nothing is published.
  Status publish_sync(std::string_view topic, std::string payload,
                      PublishOptions options = {}) const;

  /// Hands every message of `topic` (of `options.group`'s share, with a group) to `handler` on a
  /// handler thread: returning acks it, throwing nacks it, unless the handler answered it
  /// itself. Returns at once (Subscription::wait_ready() waits for the broker's confirmation);
  /// throws polybus::Error when the subscription cannot be made (errc::closed,
  /// errc::not_supported for a group or an offset the scheme cannot do, errc::invalid_argument).
  Subscription subscribe(std::string_view topic, SubscribeOptions options,
                         MessageHandler handler) const;
  /// subscribe() with the default SubscribeOptions.
  Subscription subscribe(std::string_view topic, MessageHandler handler) const;
  /// Messages taken by the application one at a time (PullSubscription::receive(), or
  /// polybus/asio/async.hpp's async_receive from a coroutine) instead of handed to a handler;
  /// each under the application's control, to settle itself. Throws as subscribe() does.
  PullSubscription pull_subscribe(std::string_view topic, SubscribeOptions options) const;
  /// pull_subscribe() with the default SubscribeOptions.
  PullSubscription pull_subscribe(std::string_view topic) const;
  /// The requests sent to `topic`, taken one at a time as pull_subscribe() takes messages; the
  /// application answers each with Message::reply() (one it drops unanswered reaches its
  /// requester as the request's deadline). Throws as serve() does.
  PullSubscription pull_serve(std::string_view topic, SubscribeOptions options) const;
  /// pull_serve() with the default SubscribeOptions.
  PullSubscription pull_serve(std::string_view topic) const;
  /// Messages in batches (BatchOptions says when one is handed over). Throws
  /// polybus::Error(errc::invalid_option) when the subscription's max_in_flight is below
  /// max_messages: such a batch could never fill.
  Subscription subscribe_batch(std::string_view topic, SubscribeOptions options, BatchOptions batch,
                               BatchHandler handler) const;

  /// Sends `payload` to whoever serves `topic`; `done` gets the Reply once, on the strand: the
  /// reply, or why there is none (errc::timeout at the deadline, 0: the op_timeout option;
  /// errc::not_supported where the client has no request/reply).
  void request(std::string_view topic, std::string payload, RequestOptions options,
               ReplyCompletion done) const;
  /// request() with the default RequestOptions (the op_timeout option, no headers).
  void request(std::string_view topic, std::string payload, ReplyCompletion done) const;
  /// Blocks until the reply came or the deadline passed. On a thread that runs the client's
  /// io_context the Reply's ec is errc::would_block_io_thread, and nothing is sent.
  Reply request_sync(std::string_view topic, std::string payload,
                     RequestOptions options = {}) const;
  /// Answers the requests sent to `topic`: `handler` runs on a handler thread and returns the
  /// reply's payload. Throws polybus::Error as subscribe() does, and errc::not_supported where
  /// the client has no request/reply.
  Subscription serve(std::string_view topic, SubscribeOptions options, ServeHandler handler) const;
  /// serve() with the default SubscribeOptions.
  Subscription serve(std::string_view topic, ServeHandler handler) const;

  /// Completes once every publish made before the call has completed (confirmed or failed: each
  /// says which in its own completion), or at the deadline (0: the op_timeout option) with
  /// errc::timeout naming how many are still pending. Publishes made meanwhile go on as usual
  /// and are not waited for. Runs `done` on the strand, as publish completions.
  void flush(std::chrono::milliseconds timeout, Completion done) const;
  /// Blocks until then. On a thread that runs the client's io_context:
  /// errc::would_block_io_thread.
  Status flush_sync(std::chrono::milliseconds timeout) const;

  /// Round trip to the broker: completes when it answered, or with errc::timeout at the deadline
  /// (0: the op_timeout option).
  void ping(std::chrono::milliseconds timeout, Completion done) const;
  /// ping() with the op_timeout option as the deadline.
  void ping(Completion done) const;

  // The earlier spellings, with the options after the completion: they forward to the one shape
  // above, and go when the ABI breaks next.

  /// Deprecated: publish(topic, payload, options, done).
  [[deprecated("options before the completion: publish(topic, payload, options, done)")]] void
  publish(std::string_view topic, std::string payload, Completion done,
          PublishOptions options) const {
    publish(topic, std::move(payload), std::move(options), std::move(done));
  }
  /// Deprecated: publish_batch(topic, payloads, options, done).
  [[deprecated(
      "options before the completion: publish_batch(topic, payloads, options, done)")]] void
  publish_batch(std::string_view topic, std::vector<std::string> payloads, Completion done,
                PublishOptions options) const {
    publish_batch(topic, std::move(payloads), std::move(options), std::move(done));
  }
  /// Deprecated: request(topic, payload, options, done).
  [[deprecated("options before the completion: request(topic, payload, options, done)")]] void
  request(std::string_view topic, std::string payload, ReplyCompletion done,
          RequestOptions options) const {
    request(topic, std::move(payload), std::move(options), std::move(done));
  }
  /// Deprecated: serve(topic, options, handler).
  [[deprecated("options before the handler: serve(topic, options, handler)")]] Subscription serve(
      std::string_view topic, ServeHandler handler, SubscribeOptions options) const;
  /// Deprecated: ping(timeout, done).
  [[deprecated("the deadline before the completion: ping(timeout, done)")]] void ping(
      Completion done, std::chrono::milliseconds timeout) const {
    ping(timeout, std::move(done));
  }

  /// Stops accepting work, drains in-flight publishes and handlers, then closes. Everything
  /// pending completes exactly once; what the deadline cuts off fails with errc::closed, and the
  /// close itself then completes with errc::timeout.
  void close(std::chrono::milliseconds timeout, Completion done = {}) const;
  /// close() with the close_timeout option as the deadline; `done` may be empty.
  void close(Completion done = {}) const;
  /// Blocks until the close completed. On a thread that runs the client's io_context:
  /// errc::would_block_io_thread, and nothing is done. From one of this client's message
  /// handlers it starts the close and returns at once: the close waits for that handler, whose
  /// message is settled as it returns, and completes in the background within `timeout`.
  Status close_sync(std::chrono::milliseconds timeout) const;

  /// The client's counters so far.
  Stats stats() const;
  /// Counters, gauges and histograms of this client, its publishes per topic and its live
  /// subscriptions; render with metrics::write_prometheus.
  metrics::ClientMetrics metrics() const;

 protected:
  /// The handle to work on, kept in `keep` for the call; null once the client is gone.
  detail::ClientHandle* pin(std::shared_ptr<detail::ClientHandle>& keep) const;

  std::weak_ptr<detail::ClientHandle> weak_;  ///< what it refers to
  detail::ClientHandle* owner_ = nullptr;     ///< a Client's own handle: no count per call
  bool owning_ = false;                       ///< a Client, empty or not
};

}  // namespace polybus
