// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the test suites. Waiting is always on a condition, with the timeout only as
// the bound after which the test fails.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "polybus/events.hpp"

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

// Blocks handlers until the test opens it; the bound only fails the test.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
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

// The connection-state events a client reports (ConnectOptions::on_state = recorder.callback()),
// with a wait for one that matches. It must outlive the client.
// For a state no event announces (server-side state, a counter that moves right after a handler
// returns): checks `holds` every millisecond until it does; the bound only fails the test.
inline bool eventually(const std::function<bool()>& holds,
                       std::chrono::milliseconds bound = kWaitBound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    if (holds()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class StateRecorder {
 public:
  StateCallback callback() {
    return [this](const StateEvent& event) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(event);
      cv_.notify_all();
    };
  }
  // The index of the first event at or after `from` that matches, once there is one.
  std::optional<std::size_t> wait_for(std::function<bool(const StateEvent&)> match,
                                      std::size_t from = 0,
                                      std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::optional<std::size_t> found;
    cv_.wait_for(lock, bound, [&] {
      for (std::size_t i = from; i < events_.size(); ++i) {
        if (match(events_[i])) {
          found = i;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  StateEvent at(std::size_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.at(index);
  }
  std::vector<StateEvent> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<StateEvent> events_;
};

// Topic names unique within the process, valid for every protocol ([.a-zA-Z0-9_-], < 64).
// Raises `peak` to `now` if it is higher, from any thread (the most handlers seen running at once).
inline void raise_to(std::atomic<int>& peak, int now) {
  for (int seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
  }
}

inline std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(++counter);
}

}  // namespace polybus::test
