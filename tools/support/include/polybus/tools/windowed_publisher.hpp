// SPDX-License-Identifier: Apache-2.0
// Publishes (or requests) with a bounded number in flight, so that stdin, a large --count or a
// benchmark streams without holding every payload in memory. A full window is waited on until half
// of it has completed, not one completion: woken once per half window rather than once per message,
// the publishing thread and the io thread stop trading places on every completion.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "polybus/client.hpp"

namespace polybus::cli {

class WindowedPublisher {
 public:
  WindowedPublisher(ClientRef client, std::string topic, std::chrono::milliseconds timeout,
                    std::size_t window = 1000)
      : client_(client), topic_(std::move(topic)), timeout_(timeout), window_(window) {}

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
    PublishOptions options;
    options.timeout = timeout_;
    options.headers = headers_;
    const auto issued = !on_complete_ ? std::chrono::steady_clock::time_point{}
                        : scheduled.time_since_epoch().count() ? scheduled
                                                               : std::chrono::steady_clock::now();
    client_.publish(topic_, std::move(payload), options, [this, issued](const polybus::Status& ec) {
      if (on_complete_) on_complete_(issued, 1, !ec);
      std::lock_guard<std::mutex> guard(mutex_);
      if (ec && failed_++ == 0) first_error_ = ec.message();
      leave_window();
    });
  }

  // One batch (MPUB where the protocol has it) counted as one in the window.
  void publish_batch(std::vector<std::string> payloads,
                     std::chrono::steady_clock::time_point scheduled = {}) {
    enter_window();
    PublishOptions options;
    options.timeout = timeout_;
    options.headers = headers_;
    const std::size_t count = payloads.size();
    const auto issued = !on_complete_ ? std::chrono::steady_clock::time_point{}
                        : scheduled.time_since_epoch().count() ? scheduled
                                                               : std::chrono::steady_clock::now();
    client_.publish_batch(topic_, std::move(payloads), options,
                          [this, count, issued](const polybus::Status& ec) {
                            if (on_complete_) on_complete_(issued, count, !ec);
                            std::lock_guard<std::mutex> guard(mutex_);
                            if (ec && (failed_ += count) == count) first_error_ = ec.message();
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
                      std::lock_guard<std::mutex> guard(mutex_);
                      if (reply.ec && failed_++ == 0) first_error_ = reply.status().message();
                      leave_window();
                    });
  }

  // Waits for every publish (or request) to complete; returns how many failed.
  std::size_t finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_at_ = 0;
    waiting_ = true;
    cv_.wait(lock, [&] { return in_flight_ == 0; });
    waiting_ = false;
    return failed_;
  }
  std::string first_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_error_;
  }

 private:
  void enter_window() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (in_flight_ >= window_) {
      wake_at_ = window_ / 2;
      waiting_ = true;
      cv_.wait(lock, [&] { return in_flight_ <= wake_at_; });
      waiting_ = false;
    }
    ++in_flight_;
  }
  // Called with mutex_ held.
  void leave_window() {
    --in_flight_;
    if (waiting_ && in_flight_ <= wake_at_) cv_.notify_all();
  }

  ClientRef client_;
  std::string topic_;
  std::chrono::milliseconds timeout_;
  Headers headers_;
  std::size_t window_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t in_flight_ = 0;
  std::size_t wake_at_ = 0;  // the waiting thread's threshold
  bool waiting_ = false;
  std::size_t failed_ = 0;
  std::string first_error_;
  OnComplete on_complete_;
};

}  // namespace polybus::cli
