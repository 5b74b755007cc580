// SPDX-License-Identifier: Apache-2.0
// Internal: the MemoDB test broker. Its state and memo01's rules (broker.cpp: workers, jobs,
// heartbeats, first-come dispatch per service) behind the listener and the public face
// (server.cpp), on one io thread; each client connection is a Session (session.hpp).
#pragma once

#include <asio.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "journal_and_faults.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/fault_rules.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/journal.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/metrics/counters_by_name.hpp"
#include "session.hpp"

namespace polybus::memodb::testing {

class BrokerImpl {
 public:
  explicit BrokerImpl(BrokerOptions options) : options_(std::move(options)) {
    for (const auto& rule : options_.faults) faults_.add(rule);
    url_ = options_.url.empty() ? "tcp://127.0.0.1:0" : options_.url;
    events_.opened = [this](std::uint64_t) { connection_count(+1); };
    events_.closed = [this](std::uint64_t id) {
      connections_.erase(id);
      connection_count(-1);
    };
    events_.stalled = [this] {
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.read_stalls;
      }
      publish_stats();
    };
    events_.request = [this](std::uint64_t connection, std::string backtrace,
                             std::string_view body) {
      const std::uint64_t key = ++next_key_;
      const std::size_t bytes = backtrace.size() + body.size();
      requests_[key] = Request{connection, std::move(backtrace), bytes};
      handle(key, body);
      publish_stats();
    };
    auto ok = run([this] { return listen(); });
    if (!ok.empty()) {
      io_.stop_and_join();
      throw std::runtime_error("memodb test broker: " + ok);
    }
  }
  ~BrokerImpl() {
    run([this] { close_all(); });
    io_.stop_and_join();
  }

  template <typename Fn>
  auto run(Fn fn) -> decltype(fn()) {
    return io_.run(std::move(fn));
  }

  // ---- control (io thread) ----
  std::string listen();
  void close_all();
  void close_keeping_port();  // stop(): close_all(), and keep the TCP port for start()

  std::string url() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return url_;
  }
  BrokerStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }
  bool wait_until(const std::function<bool(const BrokerStats&)>& condition,
                  std::chrono::milliseconds bound) const {
    std::unique_lock<std::mutex> lock(stats_mutex_);
    return stats_cv_.wait_for(lock, bound, [&] { return condition(stats_); });
  }
  metrics::BrokerMetrics metrics() const;  // io thread

  polybus::testing::Journal& journal() { return journal_; }
  polybus::testing::FaultRules& faults() { return faults_; }

 private:
  // A request waiting for the broker's answer: where it came from and its backtrace.
  struct Request {
    std::uint64_t connection = 0;
    std::string backtrace;
    std::size_t bytes = 0;   // as its connection counted it
    bool duplicate = false;  // a duplicate fault: its reply is written twice
  };

  struct Worker {
    std::string id;
    std::vector<std::string> services;
    enum class State { waiting, busy, heartbeat } state = State::waiting;
    std::uint64_t held = 0;       // its request the broker holds (waiting)
    std::uint64_t client = 0;     // the client's request (busy)
    std::string job_service;      // the service of that job
    std::uint64_t since = 0;      // when it started waiting, for first-come dispatch
    std::uint64_t timer_gen = 0;  // tells a stale timer from the current one
    // Heartbeats on the real clock (liveness); the job's timeout on BrokerOptions::clock.
    std::unique_ptr<ClockTimer> timer;
    std::unique_ptr<ClockTimer> job_timer;
    bool in_idle_index = false;  // in idle_by_service_, under `since`
  };

  struct Job {
    std::uint64_t client = 0;
    std::string service;
    std::uint64_t timeout_ms = 0;
    std::string payload;
    std::unique_ptr<ClockTimer> timer;  // queue_timeout, on BrokerOptions::clock
  };

  void accept();
  void connection_count(int change);
  // Answers request `key` with `header` + `payload`: the message `sent` (its journal entry).
  void reply(std::uint64_t key, const MessageUnit& sent, const std::string& header,
             std::string_view payload = {});
  void drop(std::uint64_t key);
  void handle(std::uint64_t key, std::string_view message);
  // What a decoded request asks for, carried out.
  void act(std::uint64_t key, const Header& header, std::string_view payload);
  // The journal's entry for the request, then the fault rule that fires for it, if any.
  void act_with_faults(std::uint64_t key, const Header& header, std::string_view payload);
  // The connection a request came on, if it is still open.
  std::shared_ptr<Session> connection_of(std::uint64_t key) const;

  void waiting(Worker& w);
  // Moves a worker out of (and with waiting, into) the index of idle workers per service.
  void set_state(Worker& w, Worker::State state);
  void unindex_idle(Worker& w);
  // Out of the queue and its index.
  Job take_job(std::map<std::uint64_t, Job>::iterator job);
  void dispatch(Worker& w, std::map<std::uint64_t, Job>::iterator job);
  void forget(const std::string& id);
  // `why`: the journal's text for it (a fault's error), memo01's DISCONNECT carries none.
  void disconnect(std::uint64_t key, std::string_view id, std::string_view why = {});
  // `on_clock`: a job's timeout, on BrokerOptions::clock; else a heartbeat's, on the real one.
  void arm(Worker& w, std::chrono::milliseconds after, void (BrokerImpl::*fn)(const std::string&),
           bool on_clock = false);
  void heartbeat_due(const std::string& id);
  void worker_timed_out(const std::string& id);
  void publish_stats();

  // Io thread: the idle workers of each service by when they began waiting, and the queued jobs
  // of each service by arrival, so that a job or a READY finds its match without looking at
  // every worker or job (10,000 services on one broker).
  std::map<std::string, std::set<std::pair<std::uint64_t, std::string>>> idle_by_service_;
  std::map<std::string, std::set<std::uint64_t>> queued_by_service_;
  std::uint64_t idle_count_ = 0;

  BrokerOptions options_;
  polybus::testing::Journal journal_{options_.journal_capacity};
  polybus::testing::FaultRules faults_;
  IoThread io_;  // before everything that uses its io_context: destroyed after them

  // io thread only:
  std::unique_ptr<asio::basic_socket_acceptor<asio::generic::stream_protocol>> acceptor_;
  PortHold port_hold_{io_.context()};  // a TCP port, while stopped
  bool ipc_ = false;
  std::string ipc_path_;
  Session::Events events_;
  std::map<std::uint64_t, std::shared_ptr<Session>> connections_;
  std::map<std::uint64_t, Request> requests_;
  bool running_ = false;
  std::uint64_t next_key_ = 0;
  std::uint64_t next_connection_ = 0;
  std::map<std::string, Worker> workers_;
  std::map<std::uint64_t, Job> jobs_;  // queued, oldest first
  // Per service (a name clients choose, so bounded), for metrics.
  struct ServiceCounters {
    std::uint64_t jobs = 0;
    std::uint64_t dispatched = 0;
    std::uint64_t results = 0;
  };
  CountersByName<ServiceCounters> services_;
  std::uint64_t next_seq_ = 0;
  std::uint32_t next_id_ = 0;
  std::mt19937 random_{std::random_device{}()};

  // Shared with callers:
  mutable std::mutex stats_mutex_;
  mutable std::condition_variable stats_cv_;
  BrokerStats stats_;
  std::string url_;
};

}  // namespace polybus::memodb::testing
