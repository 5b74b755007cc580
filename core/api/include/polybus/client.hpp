// SPDX-License-Identifier: Apache-2.0
// The polybus client: one API over every registered scheme. Safe to call from any thread.
//
// Threading: all protocol work runs on one strand of an io_context, the client's own (one
// internal io thread, the default) or the caller's (ConnectOptions::io_context). Publish,
// request and unsubscribe completions run on that strand: keep them short and never block in
// them. Message handlers run on the client's handler threads, never on the strand, so a slow
// handler does not stall the connection; each subscription runs at most `concurrency` handlers
// at once, in arrival order when it is 1.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "polybus/backoff.hpp"
#include "polybus/capabilities.hpp"
#include "polybus/events.hpp"
#include "polybus/headers.hpp"
#include "polybus/message.hpp"
#include "polybus/metrics.hpp"
#include "polybus/options.hpp"
#include "polybus/status.hpp"
#include "polybus/subscription.hpp"

namespace asio {
class io_context;  // ClientOptions can name one without the application seeing asio
}  // namespace asio

/// The polybus application API: connect() to a broker URL and use the Client it returns to
/// publish, subscribe, request and serve, over NSQ, Figg, QuickIO, MemoDB or the in-process mem://
/// broker alike.
namespace polybus {

namespace detail {
class ClientHandle;
}

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

/// How one request goes.
struct POLYBUS_API RequestOptions {
  std::chrono::milliseconds timeout{0};  ///< 0: the client's op_timeout option
  Headers headers;                       ///< as PublishOptions::headers
};

/// Trace context without a tracing dependency: plug OpenTelemetry (or anything) in here.
struct POLYBUS_API TraceHooks {
  /// Adds trace context (traceparent, tracestate) to the headers of each publish and request, and
  /// of each reply a serve handler sends, on the calling thread. Runs only with an envelope
  /// (envelope=cloudevents): nothing else carries headers.
  std::function<void(std::string_view topic, Headers& headers)> inject;
  /// Runs on the handler thread before each subscribe and serve handler, the message's headers
  /// read; what it returns (a span scope, say) is released once the handler returned.
  std::function<std::shared_ptr<void>(const Message& message)> extract;
};

/// What connect() needs besides the URL; every field may be left as it is.
struct POLYBUS_API ConnectOptions {
  /// Validated against the scheme's option table; they win over the URL's query parameters.
  Options options;
  asio::io_context* io_context = nullptr;  ///< null: the client runs its own io thread
  StateCallback on_state;  ///< told of every change of a connection's state; empty: not told
  ErrorCallback on_error;  ///< told of the errors no operation completes with; empty: not told
  LogSink log;             ///< gets the client's log lines from log_level up; empty: no logging
  LogLevel log_level = LogLevel::info;       ///< the least severe level `log` gets
  std::optional<Backoff> reconnect_backoff;  ///< replaces the reconnect_* options
  /// The "client" label of its metrics; empty: a number unique in the process.
  std::string name;
  TraceHooks trace;  ///< trace-context hooks; empty: none
};

/// A connected client, from connect(). A shared handle, cheap to copy: destroying the last copy
/// closes it as close() does, with the close_timeout option as the deadline. Every call on an
/// empty Client (default-constructed) throws polybus::Error(errc::invalid_argument).
class POLYBUS_API Client {
 public:
  /// An empty handle, not connected.
  Client() = default;
  /// Made by connect(); the handle is internal.
  explicit Client(std::shared_ptr<detail::ClientHandle> handle) : handle_(std::move(handle)) {}

  /// The URL's scheme, e.g. "nsq".
  const std::string& scheme() const;
  /// What this client can do: the scheme's capabilities, with request/reply over topics where
  /// the envelope (envelope=cloudevents) carries it for a protocol that has none.
  Capabilities capabilities() const;
  /// Publishes carry headers: the envelope is on (envelope=cloudevents).
  bool carries_headers() const;

  /// Publishes `payload` to `topic`; `done` (which may be empty) runs once with the outcome, on
  /// the strand. Fails with errc::closed, errc::not_supported (a defer or headers this client
  /// cannot carry), errc::limit_exceeded (max_outgoing_bytes) or errc::timeout at the deadline.
  void publish(std::string_view topic, std::string payload, Completion done,
               PublishOptions options = {});
  /// Publishes every payload to `topic` in one protocol operation; `done` runs once for all of
  /// them. Needs capabilities().batch_publish (else errc::not_supported); an empty batch fails
  /// with errc::invalid_argument.
  void publish_batch(std::string_view topic, std::vector<std::string> payloads, Completion done,
                     PublishOptions options = {});
  /// Blocks until the broker accepted the message or the deadline passed. Not from a completion
  /// (errc::would_block_io_thread there).
  Status publish_sync(std::string_view topic, std::string payload, PublishOptions options = {});

  /// Hands every message of `topic` (of `options.group`'s share, with a group) to `handler` on a
  /// handler thread: returning acks it, throwing nacks it, unless the handler answered it
  /// itself. Returns at once (Subscription::wait_ready() waits for the broker's confirmation);
  /// throws polybus::Error when the subscription cannot be made (errc::closed,
  /// errc::not_supported for a group or an offset the scheme cannot do, errc::invalid_argument).
  Subscription subscribe(std::string_view topic, SubscribeOptions options, MessageHandler handler);
  /// Messages in batches (BatchOptions says when one is handed over). Throws
  /// polybus::Error(errc::invalid_option) when the subscription's max_in_flight is below
  /// max_messages: such a batch could never fill.
  Subscription subscribe_batch(std::string_view topic, SubscribeOptions options, BatchOptions batch,
                               BatchHandler handler);

  /// Sends `payload` to whoever serves `topic`; `done` gets the Reply once, on the strand: the
  /// reply, or why there is none (errc::timeout at the deadline, 0: the op_timeout option;
  /// errc::not_supported where the client has no request/reply).
  void request(std::string_view topic, std::string payload, ReplyCompletion done,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  /// The same, with a deadline and headers (RequestOptions).
  void request(std::string_view topic, std::string payload, ReplyCompletion done,
               RequestOptions options);
  /// Blocks until the reply came or the deadline passed. Not from a completion (the Reply's ec
  /// is errc::would_block_io_thread there).
  Reply request_sync(std::string_view topic, std::string payload,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  /// The same, with a deadline and headers (RequestOptions).
  Reply request_sync(std::string_view topic, std::string payload, RequestOptions options);
  /// Answers the requests sent to `topic`: `handler` runs on a handler thread and returns the
  /// reply's payload. Throws polybus::Error as subscribe() does, and errc::not_supported where
  /// the client has no request/reply.
  Subscription serve(std::string_view topic, ServeHandler handler, SubscribeOptions options = {});

  /// Completes once every publish made before the call has completed (confirmed or failed: each
  /// says which in its own completion), or at the deadline (0: the op_timeout option) with
  /// errc::timeout naming how many are still pending. Publishes made meanwhile go on as usual
  /// and are not waited for. Runs `done` on the strand, as publish completions.
  void flush(std::chrono::milliseconds timeout, Completion done);
  /// Blocks until then. Not from a completion (errc::would_block_io_thread there).
  Status flush_sync(std::chrono::milliseconds timeout);

  /// Round trip to the broker: completes when it answered, or with errc::timeout at the deadline
  /// (0: the op_timeout option).
  void ping(Completion done, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// Stops accepting work, drains in-flight publishes and handlers, then closes. Everything
  /// pending completes exactly once; what the deadline cuts off fails with errc::closed, and the
  /// close itself then completes with errc::timeout.
  void close(std::chrono::milliseconds timeout, Completion done = {});
  /// Blocks until the close completed. Not from a completion (errc::would_block_io_thread there).
  Status close_sync(std::chrono::milliseconds timeout);

  /// The client's counters so far.
  Stats stats() const;
  /// Counters, gauges and histograms of this client, its publishes per topic and its live
  /// subscriptions; render with metrics::write_prometheus.
  metrics::ClientMetrics metrics() const;
  /// False for an empty (default-constructed) Client.
  explicit operator bool() const { return static_cast<bool>(handle_); }

 private:
  std::shared_ptr<detail::ClientHandle> handle_;
};

/// Connects to `url` (scheme://host:port...?options) through the adapter registered for its
/// scheme; connections are made and kept up in the background. Throws polybus::Error for a bad
/// URL, an unknown scheme or a rejected option.
POLYBUS_API Client connect(std::string_view url, ConnectOptions options = {});

}  // namespace polybus
