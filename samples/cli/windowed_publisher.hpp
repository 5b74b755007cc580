// Publishes with a bounded number in flight, so that stdin, a large --count or a benchmark
// streams without holding every payload in memory.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

#include "polybus/client.hpp"

namespace polybus::cli {

class WindowedPublisher {
 public:
  WindowedPublisher(Client& client, std::string topic, std::chrono::milliseconds timeout,
                    std::size_t window = 1000)
      : client_(client), topic_(std::move(topic)), timeout_(timeout), window_(window) {}

  void publish(std::string payload) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return in_flight_ < window_; });
    ++in_flight_;
    lock.unlock();
    PublishOptions options;
    options.timeout = timeout_;
    client_.publish(topic_, std::move(payload), [this](const polybus::Status& ec) {
      std::lock_guard<std::mutex> guard(mutex_);
      --in_flight_;
      if (ec && failed_++ == 0) first_error_ = ec.message();
      cv_.notify_all();
    }, options);
  }

  // One batch (MPUB where the protocol has it) counted as one in the window.
  void publish_batch(std::vector<std::string> payloads) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return in_flight_ < window_; });
    ++in_flight_;
    lock.unlock();
    PublishOptions options;
    options.timeout = timeout_;
    const std::size_t count = payloads.size();
    client_.publish_batch(topic_, std::move(payloads), [this, count](const polybus::Status& ec) {
      std::lock_guard<std::mutex> guard(mutex_);
      --in_flight_;
      if (ec && (failed_ += count) == count) first_error_ = ec.message();
      cv_.notify_all();
    }, options);
  }

  // Waits for every publish to complete; returns how many failed.
  std::size_t finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
    return failed_;
  }
  std::string first_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_error_;
  }

 private:
  Client& client_;
  std::string topic_;
  std::chrono::milliseconds timeout_;
  std::size_t window_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t in_flight_ = 0;
  std::size_t failed_ = 0;
  std::string first_error_;
};

}  // namespace polybus::cli
