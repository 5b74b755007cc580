// SPDX-License-Identifier: Apache-2.0
// The 14 endpoints of OpenMessaging Benchmark's worker protocol
// (https://github.com/openmessaging/benchmark, benchmark-framework's WorkerHandler), answered
// as OMB's Java worker answers them, over polybus: the driver file names a polybus URL, topics
// are named as OMB names them, each producer and each consumer is a client of its own, producers
// send at the rate /start-load and /adjust-publish-rate give (publish delay from when each
// message was due), consumers are the subscription's consumer group (request/reply-only schemes
// serve the topic, and producers send requests), pause and resume use the broker's own
// back-pressure. Transport-free: a request in, a status and body out (worker_http.hpp serves it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "worker_stats.hpp"

namespace polybus::bench::worker {

// What a request may ask for; beyond these it is refused (500, as any failure).
struct WorkerLimits {
  std::size_t max_json_depth = 16;
  std::uint32_t max_topics = 100'000;
  std::uint32_t max_clients = 10'000;  // producers and consumers of one driver together
  std::size_t max_payloads = 10'000;   // /start-load's payloadData entries
};

// Two endpoints of polybus's own beside OMB's, for a coordinator to measure end-to-end latency
// across machines whose clocks differ (OMB's coordinator never calls them; OMB's worker answers
// them 404): GET /polybus/clock gives this worker's wall clock ({"wallNanos" : N}); POST
// /polybus/clock-offset takes its offset from the coordinator's clock (nanoseconds, a JSON
// integer), which the send times stamped and the receive times read are then corrected by.

struct WorkerAnswer {
  int status = 200;
  std::string body;
};

class OmbWorker {
 public:
  // `log` gets a line for each refused request (the reason), and for each driver started.
  // `skew` pretends this machine's clock is that far off, to check a coordinator's correction.
  explicit OmbWorker(WorkerLimits limits = {}, std::function<void(const std::string&)> log = {},
                     std::chrono::nanoseconds skew = {});
  // /stop-all.
  ~OmbWorker();
  OmbWorker(const OmbWorker&) = delete;
  OmbWorker& operator=(const OmbWorker&) = delete;

  // One request, by method and path; one at a time (the caller serializes them). Unknown path or
  // method: 404 "Not found"; a request that fails: 500 "Internal server error", as OMB's worker
  // answers (its reason goes to `log`).
  WorkerAnswer handle(std::string_view method, std::string_view path, std::string_view body);

  bool driver_running() const { return driver_ != nullptr; }

 private:
  struct Driver;

  void initialize_driver(std::string_view yaml);
  std::string create_topics(std::string_view body);
  void create_producers(std::string_view body);
  void probe_producers();
  void create_consumers(std::string_view body);
  void pause_consumers(bool pause);
  void start_load(std::string_view body);
  void adjust_publish_rate(std::string_view body);
  void stop_all();
  Driver& driver(const char* what);
  std::int64_t clock_ns() const;  // this worker's wall clock, the skew added
  void set_clock_offset(std::string_view body);

  const WorkerLimits limits_;
  const std::function<void(const std::string&)> log_;
  const std::int64_t skew_ns_;
  // This worker's clock minus the coordinator's: taken out of every send and receive time.
  std::atomic<std::int64_t> offset_ns_{0};
  // Declared before the driver: its clients' handlers and completions record here until they
  // are closed.
  WorkerStats stats_;
  std::unique_ptr<Driver> driver_;
};

}  // namespace polybus::bench::worker
