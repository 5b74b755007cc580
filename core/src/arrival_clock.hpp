// Internal: "now" for work that a read sets off. A read of 64 KiB can carry a window of
// confirms, and each confirm's latency wants the time; within the read's handler they all take
// the time the read completed (one clock read for the lot, and closer to when the bytes came)
// instead of one clock read each. Outside a read's handler, now() reads the clock.
#pragma once

#include "polybus/adapter/adapter.hpp"

namespace polybus::detail {

class ArrivalClock {
 public:
  // While one lives, now() on this thread is `arrived`.
  class Scope {
   public:
    explicit Scope(Clock::time_point arrived) : outer_(current_) { current_ = arrived; }
    ~Scope() { current_ = outer_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Clock::time_point outer_;
  };

  static Clock::time_point now() {
    return current_ == Clock::time_point{} ? Clock::now() : current_;
  }

 private:
  static inline thread_local Clock::time_point current_{};
};

}  // namespace polybus::detail
