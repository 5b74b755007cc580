// SPDX-License-Identifier: Apache-2.0
// Internal: the payload bytes of publishes and requests taken and not completed yet, bounded by
// max_outgoing_bytes. Without a bound, a caller faster than its broker (or one publishing while
// the broker is away) queues without limit until each deadline passes; past it a new one is
// refused at once, as librdkafka's QUEUE_FULL does.
#pragma once

#include <atomic>
#include <cstddef>

namespace polybus::detail {

class OutgoingBytes {
 public:
  void set_limit(std::size_t limit) { limit_ = limit; }
  std::size_t limit() const { return limit_; }
  // Takes n bytes; false, taking nothing, when the total would pass the limit (`total` is then
  // what it would have been).
  bool take(std::size_t n, std::size_t& total) {
    // Compared before it is added: concurrent callers near the limit never refuse each other
    // over bytes one of them is about to give back.
    std::size_t held = held_.load(std::memory_order_relaxed);
    do {
      if (held + n > limit_) {
        total = held + n;
        return false;
      }
    } while (!held_.compare_exchange_weak(held, held + n, std::memory_order_relaxed));
    return true;
  }
  void give_back(std::size_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }
  std::size_t held() const { return held_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> held_{0};
  std::size_t limit_ = 0;  // set before the client takes anything
};

}  // namespace polybus::detail
