// Internal: pending operations with deadlines, completed exactly once by whichever comes first:
// the adapter, the deadline, or close. One timer serves them all (a min-heap of deadlines).
#pragma once

#include <asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "polybus/adapter.hpp"

namespace polybus::detail {

class OperationTracker;

struct Operation {
  using Fn = std::function<void(std::error_code, std::string reply, std::string detail)>;
  Fn fn;
  Clock::time_point deadline;
  bool done = false;
  std::weak_ptr<OperationTracker> tracker;
};

class OperationTracker : public std::enable_shared_from_this<OperationTracker> {
 public:
  explicit OperationTracker(const Strand& strand) : timer_(strand) {}

  // Strand only.
  OpCompletion add(Clock::time_point deadline, Operation::Fn fn);
  void fail_all(std::error_code ec, const std::string& detail);
  std::size_t live() const { return live_; }
  void set_on_idle(std::function<void()> fn) { on_idle_ = std::move(fn); }

  void completed();  // an Operation finished (called by OpCompletion)

 private:
  void arm();
  void on_timer();
  void prune();

  asio::steady_timer timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  std::vector<std::shared_ptr<Operation>> heap_;
  std::size_t live_ = 0;
  std::function<void()> on_idle_;
};

}  // namespace polybus::detail
