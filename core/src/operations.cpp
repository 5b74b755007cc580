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

bool OpCompletion::done() const { return !op_ || op_->done; }

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

OpCompletion OperationTracker::add(Clock::time_point deadline, Operation::Fn fn, const char* verb,
                                   std::string subject, Clock::time_point issued) {
  auto op = blocks_ ? std::allocate_shared<Operation>(PooledAllocator<Operation>(blocks_))
                    : std::make_shared<Operation>();
  op->fn = std::move(fn);
  op->deadline = deadline;
  op->started = issued == Clock::time_point::min() ? Clock::now() : issued;
  const auto due = connectivity_ ? connectivity_->first_look(op->started, deadline) : deadline;
  op->verb = verb;
  op->subject = std::move(subject);
  op->tracker = weak_from_this();
  heap_.push_back(Pending{due, op});
  std::push_heap(heap_.begin(), heap_.end(), LaterDue{});
  ++live_;
  if (heap_.size() > 1024 && heap_.size() > 4 * live_) prune();
  if (due < armed_for_) arm();
  return OpCompletion(std::move(op));
}

void OperationTracker::completed() {
  if (live_ > 0) --live_;
  if (live_ == 0) {
    heap_.clear();  // every entry is done: drop them all at once
    if (on_idle_) on_idle_();
  }
}

void OperationTracker::prune() {
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                             [](const Pending& pending) { return pending.op->done; }),
              heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), LaterDue{});
}

void OperationTracker::arm() {
  while (!heap_.empty() && heap_.front().op->done) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterDue{});
    heap_.pop_back();
  }
  if (heap_.empty()) {
    armed_for_ = Clock::time_point::max();
    timer_.cancel();
    return;
  }
  armed_for_ = heap_.front().due;
  timer_.expires_at(armed_for_);
  timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->on_timer();
  });
}

void OperationTracker::on_timer() {
  auto now = Clock::now();
  armed_for_ = Clock::time_point::max();
  std::vector<Pending> later;  // looked at early, not over yet
  while (!heap_.empty() && (heap_.front().op->done || heap_.front().due <= now)) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterDue{});
    auto op = std::move(heap_.back().op);
    heap_.pop_back();
    if (op->done) continue;
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
  for (auto& pending : later) {
    heap_.push_back(std::move(pending));
    std::push_heap(heap_.begin(), heap_.end(), LaterDue{});
  }
  if (!heap_.empty()) arm();
}

std::string OperationTracker::complete_if_pending(const Operation* made, std::error_code ec,
                                                  const std::string& detail) {
  for (const auto& pending : heap_) {
    if (pending.op.get() != made) continue;
    auto op = pending.op;  // held: completing may clear the heap
    if (!op->done) OpCompletion{op}(ec, {}, detail);
    return op->what();
  }
  return {};
}

void OperationTracker::recheck_connectivity() {
  if (!connectivity_) return;
  bool moved = false;
  const auto now = Clock::now();
  for (auto& pending : heap_) {
    const Operation& op = *pending.op;
    if (!op.done && pending.due > now &&
        connectivity_->attempts_exhausted(op.started, op.deadline)) {
      pending.due = now;
      moved = true;
    }
  }
  if (!moved) return;
  std::make_heap(heap_.begin(), heap_.end(), LaterDue{});
  arm();
}

void OperationTracker::fail_all(std::error_code ec, const std::string& detail) {
  auto pending = std::move(heap_);
  heap_.clear();
  for (auto& entry : pending)
    if (!entry.op->done) OpCompletion{entry.op}(ec, {}, detail);
  timer_.cancel();
  armed_for_ = Clock::time_point::max();
}

}  // namespace detail
}  // namespace polybus
