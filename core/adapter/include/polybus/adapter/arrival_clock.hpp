// SPDX-License-Identifier: Apache-2.0
// "Now" for work that a read sets off. A read of 64 KiB can carry a window of confirms or
// messages, and each wants the time (a confirm's latency, a message's arrival); within the
// transport's on_data call they all take the time the read completed (one clock read for the
// lot, and closer to when the bytes came) instead of one clock read each. Outside it, now()
// reads the clock. The transport opens the scope; adapters with links of their own may too.
#pragma once

#include "polybus/export.hpp"

#include "polybus/adapter/clock.hpp"

namespace polybus {

class POLYBUS_API ArrivalClock {
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

}  // namespace polybus
