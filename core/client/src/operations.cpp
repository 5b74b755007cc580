// SPDX-License-Identifier: Apache-2.0
#include "operations.hpp"

#include <algorithm>

#include "connectivity.hpp"
#include "polybus/error.hpp"

namespace polybus {

void OpCompletion::operator()(std::error_code ec, std::string reply, std::string detail) {
  if (!op_ || op_->done) return;
  op_->done = true;
  auto tracker = op_->tracker.lock();
  if (ec) {
    const std::string what = op_->what();
    if (detail.empty()) {
      detail = tracker && tracker->connectivity() ? tracker->connectivity()->explain(what) : what;
    } else if (detail.compare(0, what.size(), what) != 0) {
      // The adapter's words say what went wrong; these say which operation, the same way for
      // every scheme whether the adapter's deadline or the core's came first.
      const bool timed = ec == errc::timeout && op_->deadline != Clock::time_point::max();
      detail = (timed ? detail::not_completed_within(what, op_->deadline - op_->started) : what) +
               ": " + detail;
    }
  }
  auto fn = std::move(op_->fn);
  op_->fn = nullptr;
  if (fn) fn(ec, std::move(reply), std::move(detail));
  if (tracker) tracker->completed();
}

bool OpCompletion::done() const {
  return !op_ || op_->done;
}

Clock::time_point OpCompletion::deadline() const {
  return op_ ? op_->deadline : Clock::time_point::min();
}

namespace detail {

namespace {
struct LaterDue {
  template <typename Pending>
  bool operator()(const Pending& a, const Pending& b) const {
    return a.due > b.due;
  }
};
}  // namespace

OpCompletion OperationTracker::add(Clock::time_point deadline, Operation::Fn&& fn, const char* verb,
                                   std::string subject, Clock::time_point issued) {
  auto op = make(deadline, std::move(fn), verb, issued);
  op->subject = std::move(subject);
  return track(std::move(op));
}

OpCompletion OperationTracker::add(Clock::time_point deadline, Operation::Fn&& fn, const char* verb,
                                   std::shared_ptr<const std::string> subject,
                                   Clock::time_point issued) {
  auto op = make(deadline, std::move(fn), verb, issued);
  op->shared_subject = std::move(subject);
  return track(std::move(op));
}

std::shared_ptr<Operation> OperationTracker::make(Clock::time_point deadline, Operation::Fn&& fn,
                                                  const char* verb, Clock::time_point issued) {
  auto op = blocks_ ? std::allocate_shared<Operation>(PooledAllocator<Operation>(blocks_))
                    : std::make_shared<Operation>();
  op->fn = std::move(fn);
  op->deadline = deadline;
  op->started = issued == Clock::time_point::min() ? timer_.now() : issued;
  op->verb = verb;
  op->tracker = weak_from_this();
  return op;
}

OpCompletion OperationTracker::track(std::shared_ptr<Operation> op) {
  const auto due =
      connectivity_ ? connectivity_->first_look(op->started, op->deadline) : op->deadline;
  // Those completed in order are let go here, at once, instead of by a later prune().
  while (!in_order_.empty() && in_order_.front().op->done) in_order_.pop_front();
  insert(Pending{due, op});
  ++live_;
  if (held() > 1024 && held() > 4 * live_) prune();
  if (due < armed_for_) arm();
  return OpCompletion(std::move(op));
}

void OperationTracker::insert(Pending pending) {
  // One without a deadline is never looked at: on the heap it sinks at once, where in the queue
  // it would turn every later one away.
  const bool in_order = in_order_.empty() || in_order_.back().due <= pending.due;
  if (in_order && pending.due != Clock::time_point::max()) {
    in_order_.push_back(std::move(pending));
  } else {
    heap_.push_back(std::move(pending));
    std::push_heap(heap_.begin(), heap_.end(), LaterDue{});
  }
}

const OperationTracker::Pending* OperationTracker::earliest() {
  while (!in_order_.empty() && in_order_.front().op->done) in_order_.pop_front();
  while (!heap_.empty() && heap_.front().op->done) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterDue{});
    heap_.pop_back();
  }
  if (in_order_.empty()) return heap_.empty() ? nullptr : &heap_.front();
  if (heap_.empty() || in_order_.front().due <= heap_.front().due) return &in_order_.front();
  return &heap_.front();
}

std::shared_ptr<Operation> OperationTracker::take_due(Clock::time_point now) {
  const Pending* next = earliest();
  if (!next || next->due > now) return nullptr;
  if (!in_order_.empty() && next == &in_order_.front()) {
    auto op = std::move(in_order_.front().op);
    in_order_.pop_front();
    return op;
  }
  std::pop_heap(heap_.begin(), heap_.end(), LaterDue{});
  auto op = std::move(heap_.back().op);
  heap_.pop_back();
  return op;
}

void OperationTracker::completed() {
  if (live_ > 0) --live_;
  if (live_ == 0) {
    in_order_.clear();  // every entry is done: drop them all at once
    heap_.clear();
    if (on_idle_) on_idle_();
  }
}

void OperationTracker::prune() {
  in_order_.remove_if([](const Pending& pending) { return pending.op->done; });
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                             [](const Pending& pending) { return pending.op->done; }),
              heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), LaterDue{});
}

void OperationTracker::arm() {
  const Pending* next = earliest();
  if (!next) {
    armed_for_ = Clock::time_point::max();
    timer_.cancel();
    return;
  }
  armed_for_ = next->due;
  timer_.expires_at(armed_for_);
  timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->on_timer();
  });
}

void OperationTracker::on_timer() {
  auto now = timer_.now();
  armed_for_ = Clock::time_point::max();
  std::vector<Pending> later;  // looked at early, not over yet
  while (auto op = take_due(now)) {
    Status verdict = connectivity_
                         ? connectivity_->verdict(op->what(), op->started, op->deadline, now)
                         : Status(errc::timeout, op->what() + ": deadline passed");
    if (verdict) {
      OpCompletion{op}(verdict.code(), {}, verdict.cause());
    } else {
      const Clock::time_point deadline = op->deadline;  // looked at again then
      later.push_back(Pending{deadline, std::move(op)});
    }
  }
  for (auto& pending : later) insert(std::move(pending));
  if (held() > 0) arm();
}

std::string OperationTracker::complete_if_pending(const Operation* made, std::error_code ec,
                                                  const std::string& detail) {
  std::shared_ptr<Operation> op;  // held: completing may clear both
  auto find = [&](const auto& entries) {
    for (const auto& pending : entries)
      if (pending.op.get() == made) op = pending.op;
  };
  find(in_order_);
  if (!op) find(heap_);
  if (!op) return {};
  if (!op->done) OpCompletion{op}(ec, {}, detail);
  return op->what();
}

void OperationTracker::recheck_connectivity() {
  if (!connectivity_) return;
  bool moved = false;
  const auto now = timer_.now();
  // Rare (the connection state changed): the queue goes into the heap, where a due time may move.
  for (auto& pending : in_order_) heap_.push_back(std::move(pending));
  in_order_.clear();
  for (auto& pending : heap_) {
    const Operation& op = *pending.op;
    if (!op.done && pending.due > now &&
        connectivity_->attempts_exhausted(op.started, op.deadline)) {
      pending.due = now;
      moved = true;
    }
  }
  std::make_heap(heap_.begin(), heap_.end(), LaterDue{});
  if (moved) arm();
}

void OperationTracker::fail_all(std::error_code ec, const std::string& detail) {
  auto queued = std::move(in_order_);
  auto heaped = std::move(heap_);
  in_order_.clear();
  heap_.clear();
  for (auto& entry : queued)
    if (!entry.op->done) OpCompletion{entry.op}(ec, {}, detail);
  for (auto& entry : heaped)
    if (!entry.op->done) OpCompletion{entry.op}(ec, {}, detail);
  timer_.cancel();
  armed_for_ = Clock::time_point::max();
}

}  // namespace detail
}  // namespace polybus
