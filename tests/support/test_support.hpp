// Helpers shared by the test suites. Waiting is always on a condition, with the timeout only as
// the bound after which the test fails.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace polybus::test {

using namespace std::chrono_literals;

// Generous bound for a condition that should hold soon; only a failing test waits this long.
inline constexpr std::chrono::seconds kWaitBound{20};

// Received payloads, counted, with a wait on a predicate over them.
class Collector {
 public:
  // Notifies under the lock: a waiter that returns may destroy the collector at once.
  void add(std::string payload) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[payload];
    order_.push_back(std::move(payload));
    cv_.notify_all();
  }
  bool wait_for_count(std::size_t n, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return order_.size() >= n; });
  }
  bool wait_for_distinct(std::size_t n, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return counts_.size() >= n; });
  }
  bool wait_until(std::function<bool(const std::map<std::string, int>&)> pred,
                  std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return pred(counts_); });
  }
  std::size_t total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  std::size_t distinct() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_.size();
  }
  int count(const std::string& payload) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = counts_.find(payload);
    return it == counts_.end() ? 0 : it->second;
  }
  std::vector<std::string> order() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, int> counts_;
  std::vector<std::string> order_;
};

// Counts completions; waits for a number of them.
class Latch {
 public:
  void count_down() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    cv_.notify_all();
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return done_ >= n; });
  }
  std::size_t count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t done_ = 0;
};

// Topic names unique within the process, valid for every protocol ([.a-zA-Z0-9_-], < 64).
inline std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(++counter);
}

}  // namespace polybus::test
