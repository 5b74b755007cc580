// SPDX-License-Identifier: Apache-2.0
// Internal: the worker side of a MemoDB connection. Each serve() runs a number of workers, each
// with its slot and memo01's worker machine (machine.hpp): READY out, then a JOB or a HEARTBEAT
// in, a RESULT or the HEARTBEAT's answer out, until it leaves. Everything here runs on the
// strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "machine.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/io/reconnect.hpp"
#include "slot.hpp"

namespace polybus::memodb::detail {

class Connection;

class Workers {
 public:
  explicit Workers(Connection& connection) : connection_(connection) {}

  // Throws polybus::Error for a service name memo01 cannot carry. Returns the serve's id.
  std::uint64_t serve(const std::string& service, std::uint32_t workers,
                      std::shared_ptr<SubscriptionSink> sink);
  void unsubscribe(std::uint64_t serve);
  void set_paused(std::uint64_t serve, bool paused);
  void set_workers(std::uint64_t serve, std::uint32_t count);
  // A job's reply (MessageBackend::reply through the connection).
  void reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
             std::string detail);
  // Closing: workers whose last RESULT is on its way keep it; the others' exchanges are cancelled.
  void close();
  // Drops every worker and serve (and with them the core's sinks).
  void shutdown();
  bool exchanging() const;

 private:
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

  std::chrono::milliseconds resend_time() const;
  WorkerSlot* add(std::uint64_t serve_id, ServeRecord& serve);
  bool should_run(const WorkerSlot& worker) const;
  void start(WorkerSlot& worker);
  // Sends a worker's message: READY, a HEARTBEAT's answer or RESULT (`result`: never resent).
  void send(WorkerSlot& worker, std::string message, bool result);
  void sent(WorkerSlot& worker);
  void completed(WorkerSlot& worker, std::error_code ec, std::string reply, std::string detail);
  void register_again_later(WorkerSlot& worker);
  void on_job(WorkerSlot& worker, std::string_view service, std::string_view payload,
              std::shared_ptr<const std::string> message);
  void restart_or_stop(WorkerSlot& worker);
  void stop(WorkerSlot& worker);
  std::string describe(const WorkerSlot& worker) const;

  Connection& connection_;
  std::uint64_t next_key_ = 0;
  std::uint64_t next_serve_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<WorkerSlot>> slots_;
  std::map<std::uint64_t, ServeRecord> serves_;
};

}  // namespace polybus::memodb::detail
