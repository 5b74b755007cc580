// SPDX-License-Identifier: Apache-2.0
// The descriptors discovery may hold for dials beyond its usual bounds (max_concurrent_dials for
// a subscription, max_nsqd_connections for a publisher) while dials time out: nsqd that accept
// and never answer cost a descriptor each until connect_timeout, and nothing else, so waiting on
// many at once finds a live one among thousands of silent ones in a few timeouts, not in
// thousands / max_concurrent_dials of them. One budget for the whole process, however many
// clients discover: half the soft descriptor limit (RLIMIT_NOFILE), so that the rest stays for
// the application and the connections kept. Any thread.
#pragma once

#include <cstddef>

namespace polybus::nsq {

class DialBudget {
 public:
  // One descriptor for a dial beyond the usual bounds; false when the budget is spent.
  static bool take();
  static void give();
  // What the budget holds in all (half the soft descriptor limit), and what is taken now.
  static std::size_t size();
  static std::size_t taken();
};

// A dial beyond the usual bounds holds one unit of the budget until it ends, whichever way.
class WidenedDial {
 public:
  WidenedDial() = default;
  static WidenedDial take() {
    WidenedDial dial;
    dial.held_ = DialBudget::take();
    return dial;
  }
  WidenedDial(WidenedDial&& other) noexcept : held_(other.held_) { other.held_ = false; }
  WidenedDial& operator=(WidenedDial&& other) noexcept {
    if (this != &other) {
      release();
      held_ = other.held_;
      other.held_ = false;
    }
    return *this;
  }
  WidenedDial(const WidenedDial&) = delete;
  WidenedDial& operator=(const WidenedDial&) = delete;
  ~WidenedDial() { release(); }

  explicit operator bool() const { return held_; }
  void release() {
    if (held_) DialBudget::give();
    held_ = false;
  }

 private:
  bool held_ = false;
};

}  // namespace polybus::nsq
