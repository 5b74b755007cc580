// SPDX-License-Identifier: Apache-2.0
#include "dial_budget.hpp"

#include <sys/resource.h>

#include <atomic>

namespace polybus::nsq {
namespace {

std::size_t budget_size() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<std::size_t>(limit.rlim_cur / 2);
}

std::atomic<std::size_t> taken_units{0};

}  // namespace

std::size_t DialBudget::size() {
  // Read each time: an application may raise its limit after start-up.
  return budget_size();
}

std::size_t DialBudget::taken() {
  return taken_units.load(std::memory_order_relaxed);
}

bool DialBudget::take() {
  const std::size_t cap = size();
  std::size_t now = taken_units.load(std::memory_order_relaxed);
  while (now < cap)
    if (taken_units.compare_exchange_weak(now, now + 1, std::memory_order_relaxed)) return true;
  return false;
}

void DialBudget::give() {
  taken_units.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace polybus::nsq
