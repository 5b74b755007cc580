// SPDX-License-Identifier: Apache-2.0
// Producers sending at a rate, as OMB's workers send: spread over a few sending threads, each
// thread's share of the rate paced by when each message is due (so that a late send counts as
// publish delay rather than drifting the schedule), at most `window` publishes in flight per
// producer. Each payload carries its send time (payload_stamp.hpp) for end-to-end latency.
// Request/reply-only schemes send requests instead of publishes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "polybus/client_ref.hpp"

namespace polybus::bench {

struct PacedProducer {
  ClientRef client;
  std::string topic;
};

struct PacedSenderSettings {
  double rate = 10'000;  // messages per second, all producers together
  std::size_t threads = 1;
  std::uint32_t window = 1000;  // publishes in flight per producer
  bool requests = false;        // request() instead of publish()
  // A sending thread wakes at most once a tick, sending together what fell due meanwhile: at
  // rates of more than a message a tick per thread, fewer wake-ups (and fewer, fuller writes)
  // for up to a tick of publish delay, which is measured. 0: it wakes for each message.
  std::chrono::microseconds tick{0};
  // Messages already due when one is sent go with it in one publish_batch (NSQ's MPUB), up to
  // this many: one write and one answer for them. 1: each alone. Needs batch_publish; not with
  // requests.
  std::uint32_t max_batch = 1;
  // Added to this machine's wall clock in each payload's send time: a worker's offset from its
  // coordinator's clock taken out, so that a receiver on another machine measures across clocks.
  std::int64_t stamp_shift_ns = 0;
};

// What happened to each message. Called from the sending threads (on_send) and from the clients'
// completions (the others), concurrently.
struct PacedSenderHooks {
  std::function<void(std::int64_t delay_us)> on_send;  // from when it was due to its send
  std::function<void(std::size_t bytes, std::int64_t latency_us)> on_published;
  std::function<void(const std::string& error)> on_failed;
};

class PacedSender {
 public:
  // Starts sending at once; each payload is sent in turn. A completion may run after the
  // sender is gone (a publish that stop() did not wait out): it keeps the hooks alive, and what
  // they touch must stay until the producers' clients are closed, which completes every publish.
  PacedSender(std::vector<PacedProducer> producers, std::vector<std::string> payloads,
              PacedSenderSettings settings, PacedSenderHooks hooks);
  // stop(10 s).
  ~PacedSender();
  PacedSender(const PacedSender&) = delete;
  PacedSender& operator=(const PacedSender&) = delete;

  void set_rate(double rate) { rate_.store(rate); }
  double rate() const { return rate_.load(); }
  // Ends the sending threads, then waits up to `drain` for what is in flight to complete.
  // Returns whether all of it did. Once: a second call returns the first's answer at once. From
  // one thread at a time.
  bool stop(std::chrono::milliseconds drain);

 private:
  struct Producer;
  struct Thread;
  void send_loop(Thread& thread);

  const std::vector<std::string> payloads_;
  const PacedSenderSettings settings_;
  const std::shared_ptr<const PacedSenderHooks> hooks_;
  std::atomic<double> rate_;
  std::atomic<bool> sending_{true};
  std::atomic<std::uint64_t> sequence_{0};
  std::vector<std::shared_ptr<Thread>> threads_;
  bool stopped_ = false, drained_ = true;
};

}  // namespace polybus::bench
