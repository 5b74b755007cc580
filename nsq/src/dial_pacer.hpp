// SPDX-License-Identifier: Apache-2.0
// Paces discovery's connection attempts to at most max_dials_per_second (a subscription's and a
// publisher's alike): a list of thousands of nsqd is one pass at a bounded rate, never a burst.
// Strand only.
#pragma once

#include <algorithm>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "polybus/adapter/adapter.hpp"

namespace polybus::nsq {

class DialPacer {
 public:
  DialPacer(const Strand& strand, std::size_t per_second)
      : timer_(strand),
        spacing_(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1)) /
                 static_cast<Clock::rep>(std::max<std::size_t>(1, per_second))) {}

  // True: a dial may start now (and is counted). False: `later` runs when the next may, once
  // however often this is asked meanwhile (it holds the owner weakly).
  bool admit(std::function<void()> later) {
    const auto now = Clock::now();
    if (now >= next_) {
      next_ = std::max(next_, now - spacing_) + spacing_;
      return true;
    }
    if (!*armed_) {
      *armed_ = true;
      timer_.expires_at(next_);
      // Holds the flag, not the pacer: a wait that had already ended when its owner stopped
      // (and the pacer went with it) still runs, and finds the owner gone through `later`.
      timer_.async_wait([armed = armed_, later = std::move(later)](std::error_code ec) {
        if (ec) return;  // cancelled: the owner is stopping, or gone with this pacer
        *armed = false;
        later();
      });
    }
    return false;
  }
  void cancel() {
    timer_.cancel();
    *armed_ = false;
  }

 private:
  asio::steady_timer timer_;
  Clock::duration spacing_;
  Clock::time_point next_{};
  std::shared_ptr<bool> armed_ = std::make_shared<bool>(false);
};

}  // namespace polybus::nsq
