// SPDX-License-Identifier: Apache-2.0
// QuickIO's client session as a state machine, sans I/O: listeners and subscriptions, callback
// ids and their answers, the queue kept while disconnected, and what happens, in the document's
// order, when a connection opens (fail old callbacks, /qio/on per path, flush the queue, /open)
// and closes. The machine pushes each event text to write to its handler (send()); the owner
// feeds received event texts to receive().
// One session lives as long as the client; connections come and go underneath it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "polybus/adapter/inplace_function.hpp"
#include "polybus/quickio/codec.hpp"

namespace polybus::quickio::detail {

// The answer to a callback the client requested; code -1 when the client gave up on it.
struct Answer {
  int code;
  std::string_view data_json;
  std::string_view err_msg;
  // The answer asks for a callback in turn (a callback chain); 0: it does not.
  std::uint64_t server_callback = 0;
  std::uint64_t connection = 0;  // the connection it came on
};
using CallbackFn = std::function<void(const Answer&)>;
// Outcome of a queued or written event: {} when handed to the wire. Kept inline (one of each
// per published event: a std::function holding an operation would allocate).
using SentFn = polybus::detail::InplaceFunction<void(std::error_code), 48>;
// A queued event whose sender no longer wants it (its deadline passed) is dropped unsent.
using ExpiredFn = polybus::detail::InplaceFunction<bool(), 32>;

struct Incoming {
  std::string_view path;
  std::string_view json;
  std::uint64_t server_callback = 0;  // 0: the server asked for none
  std::uint64_t connection = 0;       // the connection it came on
  // Keeps json's bytes alive when set; otherwise they are valid only during the call.
  const std::shared_ptr<const void>* owner = nullptr;
};
using ListenerFn = std::function<void(const Incoming&)>;
using SubscribeResultFn = std::function<void(int code, std::string_view err_msg)>;

class MachineHandler {
 public:
  virtual ~MachineHandler() = default;
  // An event's text to write, in order, while a connection is open; sent gets its outcome ({}
  // once written to the socket).
  // expired: as Machine::send's, for an event the link gives back unsent.
  // text is valid only during the call: the machine builds every event in one buffer.
  virtual void send(std::string_view text, SentFn sent, ExpiredFn expired) = 0;
  // The bytes queued while disconnected changed (queued_bytes()).
  virtual void queue_changed() {}
  // /qio/move: the server wants the client elsewhere (it closes the connection next).
  virtual void move_to(const std::string& address) = 0;
  // The server refused a subscription; its listeners were removed.
  virtual void subscription_refused(const std::string& path, int code,
                                    const std::string& err_msg) = 0;
  // Bytes handed to the open connection and not yet written to it: with the events queued while
  // disconnected, bounded by max_queued_bytes.
  virtual std::size_t unsent_bytes() const { return 0; }
  // Room to write more events now (Transport::write_room). A "no" keeps events queued, as while
  // disconnected, until the owner calls flush_queue(): a publisher faster than the socket waits
  // within max_queued_bytes instead of overfilling max_write_buffer, which ends the connection.
  virtual bool write_room() { return true; }
};

struct MachineLimits {
  std::size_t max_queued_bytes = 8 * 1024 * 1024;
  std::size_t max_json_depth = kDefaultMaxJsonDepth;  // the budget's max_json_depth
};

class Machine {
 public:
  Machine(MachineLimits limits, MachineHandler& handler) : limits_(limits), handler_(handler) {}

  // ---- the connection ----
  // The handshake completed: callback ids restart at 1; subscriptions, then the queue, go out;
  // /open fires.
  void opened();
  // The connection is gone: pending callbacks get -1 "disconnected" (the document allows it
  // on reconnect at the latest; doing it at once frees callers sooner); /close fires if /open
  // did.
  void closed();
  // The client closes for good: as closed(), but callbacks get -1 "closed", the queue is
  // dropped (SentFn gets errc::closed), subscribe results still waiting get -1 "closed".
  void shut_down();
  bool is_open() const { return open_; }
  // The current connection's number (the last one's while disconnected); starts at 1.
  std::uint64_t connection() const { return connection_; }
  // One event's text as received. Errors (malformed event, malformed callback body) are the
  // codec's, with why naming what was wrong: the owner drops the connection.
  std::error_code receive(std::string_view text, const std::shared_ptr<const void>& owner,
                          std::string* why = nullptr);

  // ---- events out ----
  // path is cleaned; json must be valid JSON (errc::invalid_argument otherwise), checked here
  // unless the caller made or checked it itself (JsonIs::valid). With a callback: sent now if
  // open, else the callback gets -1 "disconnected" at once. Without: sent now, or queued
  // (client_errc::queue_full over the bound).
  enum class JsonIs { unchecked, valid };
  std::error_code send(std::string_view path, std::string_view json, CallbackFn callback = {},
                       SentFn sent = {}, ExpiredFn expired = {},
                       JsonIs json_is = JsonIs::unchecked);
  // Events the last connection took and never wrote, while closed: first in the queue again, in
  // their order, as events sent while disconnected (within max_queued_bytes; one over it, or
  // one asking for a callback, which is never queued, gets errc::disconnected).
  // An event waiting for a connection: its text, who hears its fate, and whether its sender
  // still wants it.
  struct Queued {
    std::string text;
    SentFn sent;
    ExpiredFn expired;
  };
  void requeue(std::vector<Queued> unsent);
  // Writes queued events while open and the handler has room.
  void flush_queue();
  // Answers a server callback of the given connection (errc::disconnected for an old one).
  std::error_code answer(std::uint64_t connection, std::uint64_t callback_id, int code,
                         std::string_view data_json, std::string_view err_msg = {});

  // ---- listeners ----
  // id 0: the session assigns one (the native client assigns its own, on the caller's thread).
  std::uint64_t on(std::string_view path, ListenerFn listener, bool once = false,
                   SubscribeResultFn result = {}, std::uint64_t id = 0);
  void off(std::string_view path);
  void off(std::string_view path, std::uint64_t listener_id);
  // Fires a local event (/error, say) to its listeners.
  void emit_local(std::string_view path, std::string_view json);
  bool has_listeners(std::string_view path) const;

  std::size_t queued_bytes() const { return queued_bytes_; }
  std::size_t queued_events() const { return queue_.size(); }
  // The bytes that the last send() refused with queue_full would have made (its own included).
  std::size_t refused_at() const { return refused_at_; }
  std::size_t pending_callbacks() const { return callbacks_.size(); }

  // Paths that never go to the server in /qio/on.
  static bool is_local_path(std::string_view path);

 private:
  struct ListenerEntry {
    std::uint64_t id;
    // Shared: a delivery holds it while it runs (the listener may remove itself) without
    // copying the function, which would allocate per event.
    std::shared_ptr<const ListenerFn> fn;
    bool once;
    SubscribeResultFn result;  // cleared once called
  };
  struct PathEntry {
    std::vector<ListenerEntry> listeners;
    // Of the latest /qio/on, from one count for every path: an answer to an earlier /qio/on of
    // the path, even one from before an off() removed it, is never taken for this one's.
    std::uint64_t epoch = 0;
    bool confirmed = false;  // the server accepted the /qio/on of this connection
  };
  void write(std::string_view text, SentFn sent = {}, ExpiredFn expired = {});
  // Would `bytes` more pass max_queued_bytes with what the connection has not written yet?
  // If so, refused_at() says the total.
  bool over_unsent_bound(std::size_t bytes);
  void subscribe(const std::string& path);
  void unsubscribe(const std::string& path);
  void on_subscribe_answer(const std::string& path, std::uint64_t epoch, int code,
                           std::string_view err_msg);
  void fail_callbacks(std::string_view why);
  void deliver(std::string_view path, const Incoming& event);
  void finish_results(PathEntry& entry, int code, std::string_view err_msg);

  MachineLimits limits_;
  MachineHandler& handler_;
  bool open_ = false;
  bool opened_once_since_close_ = false;  // /close only after /open
  std::uint64_t connection_ = 0;
  std::uint64_t next_callback_id_ = 1;
  std::uint64_t next_listener_id_ = 1;
  std::uint64_t next_epoch_ = 1;
  std::map<std::uint64_t, CallbackFn> callbacks_;
  std::map<std::string, PathEntry, std::less<>> paths_;
  std::deque<Queued> queue_;
  std::size_t refused_at_ = 0;
  std::size_t queued_bytes_ = 0;
  std::string event_scratch_;  // an event without a callback, built for the link to copy
  // A heartbeat answer is queued and not yet written (or dropped): later heartbeats wait for it.
  std::shared_ptr<bool> heartbeat_answer_unsent_ = std::make_shared<bool>(false);
};

}  // namespace polybus::quickio::detail
