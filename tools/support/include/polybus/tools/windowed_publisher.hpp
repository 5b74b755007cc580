// SPDX-License-Identifier: Apache-2.0
// Publishes (or requests) with a bounded number in flight, so that stdin, a large --count or a
// benchmark streams without holding every payload in memory. A full window is waited on until half
// of it has completed, not one completion: woken once per half window rather than once per message,
// the publishing thread and the io thread stop trading places on every completion. The count in
// flight is an atomic, and the lock is taken only to wait and to wake: a lock that the publishing
// thread and the io thread each took for every message would put one of them to sleep whenever
// the other held it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "polybus/client.hpp"

namespace polybus::cli {

class WindowedPublisher {
 public:
  WindowedPublisher(ClientRef client, std::string topic, std::chrono::milliseconds timeout,
                    std::size_t window = 1000)
      : client_(client), topic_(std::move(topic)), timeout_(timeout), window_(window) {}
  // After finish(), or with nothing published.
  ~WindowedPublisher() {
    while (leaving_.load() != 0) std::this_thread::yield();
  }
  WindowedPublisher(const WindowedPublisher&) = delete;
  WindowedPublisher& operator=(const WindowedPublisher&) = delete;

  // Called on the io thread as each publish (or batch) completes, with when it was issued and
  // how many messages it carried; set before the first publish.
  using OnComplete = std::function<void(std::chrono::steady_clock::time_point issued,
                                        std::size_t messages, bool ok)>;
  void on_complete(OnComplete hook) { on_complete_ = std::move(hook); }
  // Sent with every publish (they need envelope=cloudevents); set before the first publish.
  void set_headers(Headers headers) { headers_ = std::move(headers); }

  // `scheduled`: when the publish was due (a paced run), so that time spent waiting for the
  // window counts in its latency; by default, now.
  void publish(std::string payload, std::chrono::steady_clock::time_point scheduled = {}) {
    enter_window();
    PublishOptions options = publish_options();
    const auto issued = !on_complete_ ? std::chrono::steady_clock::time_point{}
                        : scheduled.time_since_epoch().count() ? scheduled
                                                               : std::chrono::steady_clock::now();
    client_.publish(topic_, std::move(payload), options, [this, issued](const polybus::Status& ec) {
      if (on_complete_) on_complete_(issued, 1, !ec);
      if (ec) note_failure(1, ec.message());
      leave_window();
    });
  }

  // One batch (MPUB where the protocol has it) counted as one in the window.
  void publish_batch(std::vector<std::string> payloads,
                     std::chrono::steady_clock::time_point scheduled = {}) {
    enter_window();
    PublishOptions options = publish_options();
    const std::size_t count = payloads.size();
    const auto issued = !on_complete_ ? std::chrono::steady_clock::time_point{}
                        : scheduled.time_since_epoch().count() ? scheduled
                                                               : std::chrono::steady_clock::now();
    client_.publish_batch(topic_, std::move(payloads), options,
                          [this, count, issued](const polybus::Status& ec) {
                            if (on_complete_) on_complete_(issued, count, !ec);
                            if (ec) note_failure(count, ec.message());
                            leave_window();
                          });
  }

  // A request in the same window; on_reply runs on the io thread with its reply. A reply with an
  // error counts as a failure.
  void request(std::string payload, std::function<void(const Reply&)> on_reply) {
    enter_window();
    client_.request(topic_, std::move(payload), timeout_,
                    [this, on_reply = std::move(on_reply)](Reply reply) {
                      on_reply(reply);
                      if (reply.ec) note_failure(1, reply.status().message());
                      leave_window();
                    });
  }

  // Waits for every publish (or request) to complete; returns how many failed.
  std::size_t finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_until_at_most(lock, 0);
    return failed_;
  }
  std::string first_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_error_;
  }

 private:
  PublishOptions publish_options() const {
    PublishOptions options;
    options.timeout = timeout_;
    // Copied only when there are some: assigning even an empty list costs about 40
    // instructions per publish, which `polybus bench` would count as the client's.
    if (!headers_.empty()) options.headers = headers_;
    return options;
  }
  void enter_window() {
    if (in_flight_.load() >= window_) {
      std::unique_lock<std::mutex> lock(mutex_);
      wait_until_at_most(lock, window_ / 2);
    }
    in_flight_.fetch_add(1);
  }
  // Waits, with mutex_ held, until no more than `level` are in flight. waiting_ is set before
  // the count is looked at, and a completion lowers the count before it looks at waiting_: one
  // of the two sees the other, and the completion that sees a waiter wakes it under the lock.
  void wait_until_at_most(std::unique_lock<std::mutex>& lock, std::size_t level) {
    wake_at_.store(level);
    waiting_.store(true);
    cv_.wait(lock, [&] { return in_flight_.load() <= level; });
    waiting_.store(false);
  }
  // leaving_ covers what a completion does after it lowered the count: finish() may return as
  // soon as the count is 0, and the destructor waits for those few instructions.
  void leave_window() {
    leaving_.fetch_add(1);
    const std::size_t left = in_flight_.fetch_sub(1) - 1;
    if (waiting_.load() && left <= wake_at_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
    leaving_.fetch_sub(1);
  }
  void note_failure(std::size_t count, std::string why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ == 0) first_error_ = std::move(why);
    failed_ += count;
  }

  ClientRef client_;
  std::string topic_;
  std::chrono::milliseconds timeout_;
  Headers headers_;
  std::size_t window_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::size_t> leaving_{0};
  std::atomic<std::size_t> wake_at_{0};  // the waiting thread's threshold
  std::atomic<bool> waiting_{false};
  std::size_t failed_ = 0;  // and first_error_: guarded by mutex_
  std::string first_error_;
  OnComplete on_complete_;
};

}  // namespace polybus::cli
