// SPDX-License-Identifier: Apache-2.0
// The polybus client: one API over every registered scheme. Safe to call from any thread.
//
// Threading: all protocol work runs on one strand of an io_context, the client's own (one
// internal io thread, the default) or the caller's (ConnectOptions::io_context). Completions,
// state events, errors and log lines run on that strand, one at a time: keep them short and never
// block in them. Message handlers run on the client's handler threads, never on the strand, so a
// slow handler does not stall the connection; each subscription runs at most `concurrency`
// handlers at once, in arrival order when it is 1.
//
// Ownership: a Client owns its connection and is moved, never copied; dropping it closes the
// client. What callbacks hold is a ClientRef (Message::client() gives one), which never keeps
// the client alive: a handler that publishes through it makes no cycle.
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
#include "polybus/client_ref.hpp"
#include "polybus/events.hpp"
#include "polybus/headers.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/message.hpp"
#include "polybus/metrics.hpp"
#include "polybus/options.hpp"
#include "polybus/pull_subscription.hpp"
#include "polybus/status.hpp"
#include "polybus/subscription.hpp"

namespace asio {
class io_context;  // ClientOptions can name one without the application seeing asio
}  // namespace asio

/// The polybus application API: connect() to a broker URL and use the Client it returns to
/// publish, subscribe, request and serve, over NSQ, Figg, QuickIO, MemoDB or the in-process mem://
/// broker alike.
namespace polybus {

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
  /// Gets the client's log lines from log_level up. Empty: warnings and errors (log_level or
  /// warn, whichever is more severe) go to stderr, "polybus[<name>] warn: ...", a storm of one
  /// kind held to a line a second, so that nothing fails in silence; errors reach the log when
  /// on_error is empty. To have none, set a sink that drops them: `[](LogLevel,
  /// std::string_view) {}`.
  LogSink log;
  LogLevel log_level = LogLevel::info;       ///< the least severe level `log` gets
  std::optional<Backoff> reconnect_backoff;  ///< replaces the reconnect_* options
  /// The "client" label of its metrics; empty: a number unique in the process.
  std::string name;
  TraceHooks trace;  ///< trace-context hooks; empty: none
  /// Time a test controls: the client's reconnect backoff, operation deadlines, batch max_wait,
  /// nack and retry delays, touches of held messages, middleware timers and NSQ's backoff and
  /// nsqlookupd polls wait on it, and run only as the test advances it (the same clock as the
  /// in-process broker's, to move both together). Connect, handshake and idle timeouts,
  /// heartbeats and pings, close() and flush() stay on the real clock, so connections stay up
  /// and a client closes however the test moves time. A *_sync call waits for its operation's
  /// deadline on this clock too: advance it from another thread, or use the asynchronous form.
  /// Null: the real clock.
  std::shared_ptr<ManualClock> clock;
};

/// A connected client, from connect(): the one owner of its connections, io thread and handler
/// threads. Moved, never copied; dropping it closes the client as close() does, with the
/// close_timeout option as the deadline: elsewhere it waits for that drain (up to close_timeout
/// and a margin of 200 ms); on a thread that runs an io_context, or on one of the client's
/// handler threads, it starts the close and returns at once, and the close goes on in the
/// background. Callbacks hold a ClientRef instead (Message::client(), or `ClientRef ref =
/// client`).
/// Every call on an empty Client (default-constructed or moved from) throws
/// polybus::Error(errc::invalid_argument).
class POLYBUS_API Client : public ClientRef {
 public:
  /// An empty handle, not connected.
  Client() noexcept { owning_ = true; }
  /// Made by connect(); the handle is internal.
  explicit Client(std::shared_ptr<detail::ClientHandle> handle) noexcept;
  /// Takes the client over; `other` is left empty.
  Client(Client&& other) noexcept;
  /// Closes the client this one owned (as its destructor does), then takes `other`'s over.
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  /// Closes the client (see the class).
  ~Client();

  /// A reference to this client for a callback to hold.
  ClientRef ref() const noexcept { return ClientRef(*this); }
  /// False for an empty (default-constructed or moved-from) Client.
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }

 private:
  std::shared_ptr<detail::ClientHandle> handle_;
};

/// Connects to `url` (scheme://host:port...?options) through the adapter registered for its
/// scheme; connections are made and kept up in the background. Throws polybus::Error for a bad
/// URL, an unknown scheme or a rejected option.
POLYBUS_API Client connect(std::string_view url, ConnectOptions options = {});

}  // namespace polybus
