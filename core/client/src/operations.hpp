// SPDX-License-Identifier: Apache-2.0
// Internal: pending operations with deadlines, completed exactly once by whichever comes first:
// the adapter, the deadline, or close. One timer serves them all (the times each operation is
// looked at next: in a queue while they come in order, as every operation with the client's one
// timeout does, and in a min-heap for those that come earlier than the newest queued). What a late
// operation completes with, and whether one of a client that never connected fails early,
// Connectivity decides.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "block_pool.hpp"
#include "connectivity.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/inplace_function.hpp"

namespace polybus::detail {

class OperationTracker;

struct Operation {
  // Kept inside the operation: an operation costs one allocation, not two. The strings by
  // reference: passed on through two calls per completion, by value they were moved each time.
  using Fn = InplaceFunction<void(std::error_code, std::string&& reply, std::string&& detail), 96>;
  Fn fn;
  Clock::time_point deadline;
  Clock::time_point started;
  // "publish to t" (verb + subject): names it in a failure's cause. Kept in two parts and joined
  // only when a failure needs it: a short topic fits the string's own storage, so a publish that
  // succeeds allocates no name.
  const char* verb = "";
  std::string subject;
  // Instead of subject, a string the client keeps anyway (a publish's topic): shared, not copied
  // per operation, which would allocate once a topic outgrows a string's inline storage.
  std::shared_ptr<const std::string> shared_subject;
  std::string what() const { return verb + (shared_subject ? *shared_subject : subject); }
  bool done = false;
  std::weak_ptr<OperationTracker> tracker;
};

class OperationTracker : public std::enable_shared_from_this<OperationTracker> {
 public:
  // connectivity may be null (no causes from connections, no early failure); blocks too (each
  // operation is then an allocation of its own).
  // clock: the client's (ConnectOptions::clock), which deadlines are reckoned on; null: the
  // real one.
  OperationTracker(const Strand& strand, std::shared_ptr<const Connectivity> connectivity,
                   std::shared_ptr<BlockPool> blocks = nullptr,
                   std::shared_ptr<ManualClock> clock = nullptr)
      : timer_(strand, std::move(clock)),
        connectivity_(std::move(connectivity)),
        blocks_(std::move(blocks)) {}

  // Strand only.
  // issued: when the caller asked (the deadline was computed from it); default: now.
  OpCompletion add(Clock::time_point deadline, Operation::Fn&& fn, std::string what = "operation",
                   Clock::time_point issued = Clock::time_point::min()) {
    return add(deadline, std::move(fn), "", std::move(what), issued);
  }
  // Named verb + subject, e.g. ("publish to ", topic); verb must be a string literal.
  OpCompletion add(Clock::time_point deadline, Operation::Fn&& fn, const char* verb,
                   std::string subject, Clock::time_point issued);
  // The same with a shared subject (Operation::shared_subject).
  OpCompletion add(Clock::time_point deadline, Operation::Fn&& fn, const char* verb,
                   std::shared_ptr<const std::string> subject, Clock::time_point issued);
  void fail_all(std::error_code ec, const std::string& detail);
  // Completes `made` now unless it is done already: its maker failed before handing it on (an
  // adapter that threw). Returns its name ("publish to t"), empty if it is no longer held.
  // Linear in the pending operations; for failures only.
  std::string complete_if_pending(const Operation* made, std::error_code ec,
                                  const std::string& detail);
  std::size_t live() const { return live_; }
  // Entries held, live or completed and not yet let go: bounded by a multiple of live().
  std::size_t held() const { return in_order_.size() + heap_.size(); }
  const Connectivity* connectivity() const { return connectivity_.get(); }
  void set_on_idle(std::function<void()> fn) { on_idle_ = std::move(fn); }

  void completed();  // an Operation finished (called by OpCompletion)
  // The connection state changed: operations that no connection attempt can serve in time are
  // looked at now.
  void recheck_connectivity();

 private:
  struct Pending;
  // An operation made, its subject not yet set.
  std::shared_ptr<Operation> make(Clock::time_point deadline, Operation::Fn&& fn, const char* verb,
                                  Clock::time_point issued);
  OpCompletion track(std::shared_ptr<Operation> op);
  void insert(Pending pending);
  // Drops completed entries at the fronts; the earliest due of the two fronts, or null.
  const Pending* earliest();
  // The earliest entry if it is due by `now` (and not completed): taken out. Else null.
  std::shared_ptr<Operation> take_due(Clock::time_point now);
  void arm();
  void on_timer();
  void prune();

  ClockTimer timer_;
  std::shared_ptr<const Connectivity> connectivity_;  // shares the client's state: outlives it
  std::shared_ptr<BlockPool> blocks_;                 // the same
  Clock::time_point armed_for_ = Clock::time_point::max();
  // An operation and when it is looked at next (its deadline, or earlier): the heap orders
  // these without following a pointer per comparison.
  struct Pending {
    Clock::time_point due;
    std::shared_ptr<Operation> op;
  };
  Fifo<Pending> in_order_;     // due times never decreasing: O(1) to add and to let go
  std::vector<Pending> heap_;  // min-heap of those that came out of order
  std::size_t live_ = 0;
  std::function<void()> on_idle_;
};

}  // namespace polybus::detail
