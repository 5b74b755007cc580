// SPDX-License-Identifier: Apache-2.0
// Internal: one MemoDB client object = one req0 socket of our own (req0_socket.hpp) on the
// client's strand: one connection to the broker, reconnected per the client's backoff policy,
// with one exchange per request in flight and one per worker, so any number of requesters and
// workers share the connection (the protocol's multiplexing). Everything here runs on the
// strand.
#pragma once

#include <asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "machine.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/io/reconnect.hpp"
#include "polybus/memodb/codec.hpp"
#include "req0_socket.hpp"

namespace polybus::memodb::detail {

struct ConnectionSettings {
  std::string address;  // tcp://host:port, tcp://[v6]:port or ipc:///path (as NNG writes them)
  std::chrono::milliseconds heartbeat_interval{10'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds queue_timeout{10'000};
  std::chrono::milliseconds job_timeout{0};  // 0: each request's remaining deadline
  std::uint32_t max_requests = 8;
  std::size_t max_message = 16 << 20;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds frame_timeout{30'000};
  std::chrono::milliseconds write_timeout{10'000};
};

class Connection : public MessageBackend, public std::enable_shared_from_this<Connection> {
 public:
  Connection(const AdapterContext& context, ConnectionSettings settings);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting. Throws polybus::Error for an address it cannot use.
  void open();

  // Adapter work (strand).
  void request(RequestWork work);
  std::shared_ptr<AdapterSubscription> serve(const std::string& service, std::uint32_t workers,
                                             std::shared_ptr<SubscriptionSink> sink);
  void close(Clock::time_point deadline, std::function<void()> done);
  // Drops the connection; whatever is pending completes with closed. Idempotent.
  void shutdown();

  // serve() controls (strand).
  void unsubscribe(std::uint64_t serve, OpCompletion done);
  void set_paused(std::uint64_t serve, bool paused);
  void set_workers(std::uint64_t serve, std::uint32_t count);

  // MessageBackend (strand). Jobs take only reply(); the core refuses the others.
  void ack(polybus::detail::MessageState&) override {}
  void nack(polybus::detail::MessageState&, std::chrono::milliseconds) override {}
  void touch(polybus::detail::MessageState&) override {}
  void reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
             std::string detail) override;

 private:
  // A request or a worker, and its exchange with the broker (0: none under way).
  struct Slot {
    explicit Slot(std::uint64_t k) : key(k) {}
    const std::uint64_t key;
    Req0Socket::ExchangeId exchange = 0;
    bool pending = false;  // an exchange was started and its reply not yet handled
  };

  struct RequestSlot : Slot {
    using Slot::Slot;
    OpCompletion done;
    std::string service;
  };

  struct WorkerSlot : Slot {
    using Slot::Slot;
    Worker machine{{}};  // memo01's worker exchange (machine.hpp)
    std::uint64_t serve = 0;
    bool retire = false;        // remove this worker once it is stopped
    std::uint32_t job_seq = 0;  // the job being handled, to match its reply
    // READY again after a DISCONNECT waits per the reconnect policy (a broker answering every
    // READY with DISCONNECT must not get thousands a second); a JOB or HEARTBEAT resets it.
    std::unique_ptr<Reconnector> reregister;
  };

  struct ServeRecord {
    std::string service;
    std::shared_ptr<SubscriptionSink> sink;
    std::uint32_t target = 1;
    bool paused = false;
    bool gone = false;  // unsubscribed: workers leave, the record goes with the last one
    bool confirmed = false;
    std::vector<std::uint64_t> workers;
  };

  void connected();
  void ended(std::error_code why, const std::string& detail, bool was_up);
  std::chrono::milliseconds worker_resend_time() const;
  void cancel(Slot& slot);

  // Requests.
  void start_request(RequestWork work);
  void request_completed(RequestSlot& slot, std::error_code ec, std::string reply,
                         std::string detail);
  void finish_request(RequestSlot& slot, std::error_code ec, std::string reply, std::string detail);
  void pump_requests();
  // Says how many requests wait (for a free slot, or in one for the connection) to the metrics.
  void count_waiting();

  // Workers.
  WorkerSlot* add_worker(std::uint64_t serve_id, ServeRecord& serve);
  bool should_run(const WorkerSlot& worker) const;
  void start_worker(WorkerSlot& worker);
  // Sends a worker's message: READY, a HEARTBEAT's answer or RESULT (`result`: never resent).
  void send_worker(WorkerSlot& worker, std::string message, bool result);
  void worker_sent(WorkerSlot& worker);
  void worker_completed(WorkerSlot& worker, std::error_code ec, std::string reply,
                        std::string detail);
  void on_job(WorkerSlot& worker, std::string_view service, std::string_view payload,
              std::shared_ptr<const std::string> message);
  void restart_or_stop(WorkerSlot& worker);
  void stop_worker(WorkerSlot& worker);
  std::string describe(const WorkerSlot& worker) const;

  void maybe_finish_close();
  void finish_close();

  AdapterContext ctx_;
  ConnectionSettings settings_;
  std::shared_ptr<Req0Socket> socket_;
  ReconnectLoop reconnect_;
  std::uint64_t next_key_ = 0;
  std::uint64_t next_serve_ = 0;
  bool closing_ = false;        // no new work; workers leave
  bool close_pending_ = false;  // close() waits for the last exchanges, then shuts down
  bool dead_ = false;           // shut down: the socket is closed
  std::function<void()> close_done_;
  asio::steady_timer close_timer_;

  std::unordered_map<std::uint64_t, std::unique_ptr<RequestSlot>> requests_;
  std::vector<RequestSlot*> idle_requests_;
  std::size_t active_requests_ = 0;
  std::deque<RequestWork> waiting_;

  std::unordered_map<std::uint64_t, std::unique_ptr<WorkerSlot>> workers_;
  std::map<std::uint64_t, ServeRecord> serves_;
};

}  // namespace polybus::memodb::detail
