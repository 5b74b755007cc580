// The polybus client: one API over every registered scheme. Safe to call from any thread.
//
// Threading: all protocol work runs on one strand of an io_context, the client's own (one
// internal io thread, the default) or the caller's (ConnectOptions::io_context). Publish,
// request and unsubscribe completions run on that strand: keep them short and never block in
// them. Message handlers run on the client's handler threads, never on the strand, so a slow
// handler does not stall the connection; each subscription runs at most `concurrency` handlers
// at once, in arrival order when it is 1.
#pragma once

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

namespace polybus {

namespace detail {
class ClientHandle;
}

// Completes with success or a failure and its cause. [](std::error_code ec) {...} also fits.
using Completion = std::function<void(const Status&)>;

struct Reply {
  std::error_code ec;
  std::string payload;
  std::string detail;  // the broker's or responder's error text, when ec is set
  Headers headers;     // the reply envelope's attributes (envelope=cloudevents)
  Status status() const { return {ec, detail}; }
};
using ReplyCompletion = std::function<void(Reply)>;

struct PublishOptions {
  std::chrono::milliseconds timeout{0};  // 0: the client's op_timeout option
  std::chrono::milliseconds defer{0};    // deferred publish; needs capabilities().deferred_publish
  // Travel in the envelope (envelope=cloudevents); with the envelope off a publish with headers
  // fails with not_supported. Names are CloudEvents attribute names (a-z, 0-9, at most 20);
  // id, source, type, time, subject, dataschema and datacontenttype set those attributes.
  Headers headers;
};

struct RequestOptions {
  std::chrono::milliseconds timeout{0};  // 0: the client's op_timeout option
  Headers headers;                       // as PublishOptions::headers
};

// Trace context without a tracing dependency: plug OpenTelemetry (or anything) in here.
struct TraceHooks {
  // Adds trace context (traceparent, tracestate) to the headers of each publish and request, and
  // of each reply a serve handler sends, on the calling thread. Runs only with an envelope
  // (envelope=cloudevents): nothing else carries headers.
  std::function<void(std::string_view topic, Headers& headers)> inject;
  // Runs on the handler thread before each subscribe and serve handler, the message's headers
  // read; what it returns (a span scope, say) is released once the handler returned.
  std::function<std::shared_ptr<void>(const Message& message)> extract;
};

struct ConnectOptions {
  Options options;                      // validated against the scheme's option table
  asio::io_context* io_context = nullptr;  // null: the client runs its own io thread
  StateCallback on_state;
  ErrorCallback on_error;
  LogSink log;
  LogLevel log_level = LogLevel::info;
  std::optional<Backoff> reconnect_backoff;  // replaces the reconnect_* options
  std::string name;  // the "client" label of its metrics; empty: a number unique in the process
  TraceHooks trace;
};

class Client {
 public:
  Client() = default;
  explicit Client(std::shared_ptr<detail::ClientHandle> handle) : handle_(std::move(handle)) {}

  const std::string& scheme() const;
  Capabilities capabilities() const;
  // Publishes carry headers: the envelope is on (envelope=cloudevents).
  bool carries_headers() const;

  void publish(std::string_view topic, std::string payload, Completion done,
               PublishOptions options = {});
  void publish_batch(std::string_view topic, std::vector<std::string> payloads, Completion done,
                     PublishOptions options = {});
  // Blocks until the broker accepted the message or the deadline passed. Not from a completion.
  Status publish_sync(std::string_view topic, std::string payload,
                               PublishOptions options = {});

  Subscription subscribe(std::string_view topic, SubscribeOptions options, MessageHandler handler);
  // Messages in batches (BatchOptions says when one is handed over). Throws
  // polybus::Error(errc::invalid_option) when the subscription's max_in_flight is below
  // max_messages: such a batch could never fill.
  Subscription subscribe_batch(std::string_view topic, SubscribeOptions options, BatchOptions batch,
                               BatchHandler handler);

  void request(std::string_view topic, std::string payload, ReplyCompletion done,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  void request(std::string_view topic, std::string payload, ReplyCompletion done,
               RequestOptions options);
  Reply request_sync(std::string_view topic, std::string payload,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  Reply request_sync(std::string_view topic, std::string payload, RequestOptions options);
  Subscription serve(std::string_view topic, ServeHandler handler, SubscribeOptions options = {});

  // Completes once every publish made before the call has completed (confirmed or failed: each
  // says which in its own completion), or at the deadline with errc::timeout naming how many are
  // still pending. Publishes made meanwhile go on as usual and are not waited for. Runs `done` on
  // the strand, as publish completions.
  void flush(std::chrono::milliseconds timeout, Completion done);
  // Blocks until then. Not from a completion (errc::would_block_io_thread there).
  Status flush_sync(std::chrono::milliseconds timeout);

  // Round trip to the broker.
  void ping(Completion done, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Stops accepting work, drains in-flight publishes and handlers, then closes. Everything
  // pending completes exactly once; what the deadline cuts off fails with errc::closed.
  void close(std::chrono::milliseconds timeout, Completion done = {});
  Status close_sync(std::chrono::milliseconds timeout);

  Stats stats() const;
  // Counters, gauges and histograms of this client, its publishes per topic and its live
  // subscriptions; render with metrics::write_prometheus.
  metrics::ClientMetrics metrics() const;
  explicit operator bool() const { return static_cast<bool>(handle_); }

 private:
  std::shared_ptr<detail::ClientHandle> handle_;
};

// Throws polybus::Error for a bad URL, an unknown scheme or a rejected option.
Client connect(std::string_view url, ConnectOptions options = {});

}  // namespace polybus
