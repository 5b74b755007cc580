// SPDX-License-Identifier: Apache-2.0
// Internal: state shared by the client core, its adapter and every message it delivered.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "block_pool.hpp"
#include "connectivity.hpp"
#include "envelope.hpp"
#include "flush_epochs.hpp"
#include "metric_cells.hpp"
#include "operations.hpp"
#include "outgoing_bytes.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/events.hpp"
#include "response_intake.hpp"

namespace polybus::detail {

// Each on a cache line of its own: the caller's thread counts publishes, the io thread receipts
// and bytes, handler threads acks, each for every message. On a shared line each count waits
// for the line to come over from the core that counted last.
struct AtomicStats {
  alignas(64) std::atomic<std::uint64_t> published{0}, publish_acked{0},
      publish_failed{0}, received{0}, acked{0}, nacked{0}, discarded{0}, dead_lettered{0},
      delivered_raw{0}, requests{0}, replies{0}, reconnects{0}, bytes_in{0}, bytes_out{0};
  Stats snapshot() const;
};

struct Runtime;
class ClientHandle;
class ContextWatch;

class ClientShared : public std::enable_shared_from_this<ClientShared> {
 public:
  ClientShared(Strand strand, std::string scheme)
      : strand(std::move(strand)),
        scheme(std::move(scheme)),
        message_blocks(this->strand, shared_block_size<MessageState>(), kSpareBlocks),
        operation_blocks(this->strand, shared_block_size<Operation>(), kSpareBlocks) {}
  ~ClientShared();
  ClientShared(const ClientShared&) = delete;
  ClientShared& operator=(const ClientShared&) = delete;

  // Keeps the io_context alive for as long as anything that may hold io objects exists. Declared
  // first so that it is destroyed last, after the strand below.
  std::shared_ptr<Runtime> runtime;
  Strand strand;
  std::string scheme;
  std::string name;  // the metrics' client label
  AtomicStats stats;
  std::atomic<std::uint64_t> publish_refused{0};
  OutgoingBytes outgoing;              // max_outgoing_bytes
  FlushEpochs flush_epochs;            // which publishes a flush waits for
  TopicCellsMap publish_topics;        // per-topic publish metrics
  PublishNodeCellsList publish_nodes;  // the nodes the adapter spreads publishes over
  // Gauges of what is held unsent (ClientMetrics::waiting_*): the adapter's, set by it
  // (AdapterContext::waiting_*), and the requests over topics waiting for the reply subscription.
  std::atomic<std::uint64_t> adapter_waiting_publishes{0};
  std::atomic<std::uint64_t> adapter_waiting_requests{0};
  std::atomic<std::uint64_t> topic_requests_waiting{0};
  LatencyCells request_latency;
  ResponseIntake responses;  // acks, nacks, touches and replies on their way to the strand
  StateCallback on_state;
  ErrorCallback on_error;
  LogSink log_sink;
  LogLevel log_level = LogLevel::info;
  Capabilities caps;
  Envelope envelope;  // set before the adapter starts, read-only after
  // Request/reply runs over topics (TopicRequests): a reply is wrapped by the backend that
  // publishes it, with its correlation id. Set before any message, read-only after.
  bool replies_over_topics = false;
  std::chrono::milliseconds requeue_delay{0};
  std::chrono::milliseconds max_requeue_delay{0};
  std::optional<Backoff> custom_backoff;
  // ConnectOptions::clock; set before the adapter starts, read-only after. What a test may move
  // waits on it (ClockTimer), and reckons from now().
  std::shared_ptr<ManualClock> clock;
  Clock::time_point now() const { return clock ? clock->now() : Clock::now(); }
  // now() for what a read set off (ArrivalClock): a confirm's or a reply's latency.
  Clock::time_point arrival_now() const { return clock ? clock->now() : ArrivalClock::now(); }
  Connectivity connectivity;
  // A reconnect was scheduled: operations that no attempt left can serve in time may fail now.
  std::function<void()> on_retry_scheduled;
  // Set once close has completed: no state event or error reaches the application after it.
  std::atomic<bool> closed{false};
  // The Client's handle, for Message::client(): never an owning reference. Set by connect()
  // before any message exists, read-only after.
  std::weak_ptr<ClientHandle> handle;
  void set_handle(const std::shared_ptr<ClientHandle>& owner) { handle = owner; }
  // Memory for the state of each delivered message and the operation of each publish, reused
  // (block_pool.hpp). Each block keeps this object alive while it is out.
  static constexpr std::size_t kSpareBlocks = 4096;
  BlockPool message_blocks;
  BlockPool operation_blocks;

  // The application's io_context (ConnectOptions::io_context) checks, as it is destroyed, that
  // this client is gone: set by connect() for such an io_context.
  void watch_context(asio::io_context& io);
  // This thread runs the client's io_context: its own io thread, or any thread of the
  // application's.
  bool on_io_context() const;

  // The application's callbacks for what belongs to no operation: on_error, on_state and log run
  // on the strand, one at a time and in the order each thread raised them, whatever thread that
  // was. What one throws is reported through the next (on_state's through on_error, on_error's
  // through the log); the log's is dropped, there being nothing after it.
  void emit_error(std::error_code ec, const std::string& message) const;
  void notify_state(const StateEvent& event) const;
  // Calls an application's completion (when set) from the strand: what it throws is reported
  // (errc::handler_failed, naming `what`) instead of unwinding through the adapter's state and
  // out of the io thread, which would end the process.
  template <typename What, typename Fn, typename Arg>
  void complete(const What& what, const Fn& fn, Arg&& arg) const {
    if (!fn) return;
    try {
      fn(std::forward<Arg>(arg));
    } catch (const std::exception& e) {
      emit_error(make_error_code(errc::handler_failed),
                 std::string(what) + ": the application's completion threw: " + e.what());
    } catch (...) {
      emit_error(
          make_error_code(errc::handler_failed),
          std::string(what) + ": the application's completion threw a non-standard exception");
    }
  }
  void log(LogLevel level, std::string_view text) const;
  bool logs(LogLevel level) const { return log_sink && level >= log_level; }

 private:
  void call_on_error(std::error_code ec, const std::string& message) const;
  void call_log(LogLevel level, std::string_view text) const;
  ContextWatch* watch_ = nullptr;  // the application's io_context's, where there is one
};

}  // namespace polybus::detail

namespace polybus {
class Message;
namespace detail {
// Answers a request with an error (the serve handler threw or went away).
void detail_reply_error(Message& message, const std::string& what);
}  // namespace detail
}  // namespace polybus
