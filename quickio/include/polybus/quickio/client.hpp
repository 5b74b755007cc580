// SPDX-License-Identifier: Apache-2.0
// The native QuickIO client, in the manner of the reference clients the protocol document
// describes (on/one/off/send/close/reconnect, the /open, /close and /error events) with what a
// nats.c user expects on top: a bounded queue while disconnected, reconnect with backoff, error
// and log hooks.
//
// Threading: every public method is safe to call from any thread; the work is posted to the
// client's strand. Every callback (listeners, send callbacks, subscribe results, the error and
// log hooks) runs on that strand: on the client's own io thread, or on a thread running the
// io_context given in ClientOptions. Keep callbacks short; they may call the client again.
//
// Every send callback fires exactly once: with the server's answer, or with errc::disconnected
// when the connection it was sent on is lost (or was down when it was sent: callbacks are never
// queued), or errc::closed when the client closes. Outcomes are polybus::Status, as the rest of
// polybus reports them: the server's own code is kept (answer_category(), below).
#pragma once

#include "polybus/export.hpp"

#include <asio/io_context.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "polybus/events.hpp"
#include "polybus/options.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/status.hpp"

namespace polybus::quickio {

class ServerCallback;

// The category of the codes a QuickIO server answers a callback with (value: the code, e.g.
// 404): 404 is errc::no_responder, 500 with err_msg "handler failed: ..." errc::handler_failed
// (said in the cause), any other errc::broker_error.
POLYBUS_API const std::error_category& answer_category() noexcept;
// A callback's answer as a Status: success for 2xx; else the code in answer_category() (500
// from a failed serve handler as errc::handler_failed), -1 as errc::disconnected or
// errc::closed; the cause names `what` ("/path") and carries the server's err_msg.
POLYBUS_API Status answer_status(std::string_view what, int code, std::string_view err_msg);

// Answer to a callback the client asked for: an empty Status and the data on success, else why
// (answer_status()). `next` is set when the answer asks for a callback in turn (a callback
// chain, as QuickIO's client-test app does): answer it with next.reply().
using SendCallback =
    std::function<void(const Status& status, std::string_view data_json, ServerCallback next)>;

namespace detail {
// Answers server callbacks on behalf of a connection; implemented by the client's engine.
class POLYBUS_API Responder {
 public:
  virtual ~Responder() = default;
  virtual std::error_code answer(std::uint64_t connection, std::uint64_t callback_id, int code,
                                 std::string data_json, std::string err_msg) = 0;
};
struct POLYBUS_API ServerCallbackState {
  std::weak_ptr<Responder> responder;
  std::uint64_t connection = 0;
  std::uint64_t id = 0;
  std::atomic<bool> answered{false};
};
}  // namespace detail

// The server asked for a callback with an event: answer it once. It belongs to the connection
// the event came on: after a reconnect, reply() is refused with errc::disconnected.
class POLYBUS_API ServerCallback {
 public:
  ServerCallback() = default;
  explicit ServerCallback(std::shared_ptr<detail::ServerCallbackState> state)
      : state_(std::move(state)) {}
  // False when the event asked for no callback (reply() then returns errc::invalid_argument).
  explicit operator bool() const { return static_cast<bool>(state_); }
  // errc::already_responded for a second answer, errc::disconnected when the connection the
  // event came on is gone, errc::closed when the client is.
  std::error_code reply(int code = 200, std::string data_json = "null", std::string err_msg = {});

 private:
  std::shared_ptr<detail::ServerCallbackState> state_;
};

// json: the event's data, valid during the call. callback: set when the server asked for one.
using Listener = std::function<void(std::string_view json, ServerCallback callback)>;
// The outcome of the first /qio/on for a listener: an empty Status when subscribed (200, or 202:
// pending); a refusal (answer_status(); the listener was removed); errc::closed when the
// listener was removed (off, close) before the server answered.
using SubscribeResult = std::function<void(const Status& status)>;
using ListenerId = std::uint64_t;

struct POLYBUS_API ClientOptions {
  // Checked against the scheme's option table (heartbeat_timeout, http_poll_delay_max,
  // http_request_timeout, max_queued_bytes, connect_timeout, reconnect_*, ...: docs/quickio.md);
  // these win over the URL's query.
  Options options;
  asio::io_context* io_context = nullptr;  // null: the client runs its own io thread
  ErrorCallback on_error;                  // connection errors, refused subscriptions, ...
  LogSink log;
  LogLevel log_level = LogLevel::info;
  // False: the client connects on its first reconnect(), the document's way for threaded
  // clients, so that /open and /close listeners added first see the first connection (true:
  // the connection may open before a listener added right after construction is in place).
  bool connect_now = true;
};

class POLYBUS_API Client {
 public:
  // quickio://host:port, quickio+ws://host:port[/path], quickio+http://host:port. Starts
  // connecting at once unless options.connect_now is false. Throws polybus::Error for a bad URL or
  // option.
  explicit Client(std::string_view url, ClientOptions options = {});
  // Closes (see close()) and, when the client owns its io thread, joins it (unless called from
  // that very thread, which is then left to finish on its own).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Listens to an event path (cleaned as the document says). The first listener of a path
  // subscribes with /qio/on (again after every reconnect). "/open", "/close", "/error" and
  // "/qio/..." paths are local events: never sent in a /qio/on.
  ListenerId on(std::string_view path, Listener listener, SubscribeResult result = {});
  // As on(), removed after its first event.
  ListenerId one(std::string_view path, Listener listener, SubscribeResult result = {});
  // Removes every listener of path, or one; /qio/off goes out when no listener is left.
  void off(std::string_view path);
  void off(std::string_view path, ListenerId id);

  // Sends an event with JSON data (validated: errc::invalid_argument when it is not JSON).
  // Without a callback, an event sent while disconnected is queued (serialised now) and sent
  // after the next handshake; client_errc::queue_full when the queue would exceed
  // max_queued_bytes (checked here; a race with other threads is reported to on_error).
  std::error_code send(std::string_view path, std::string json, SendCallback callback = {});

  // Drops the connection (if any) and connects again at once; the first connection of a client
  // made with connect_now false.
  void reconnect();
  // Closes for good: fires /close (if open), fails pending callbacks with -1 "closed" and drops
  // the queue. Idempotent.
  void close();
  bool connected() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace polybus::quickio
