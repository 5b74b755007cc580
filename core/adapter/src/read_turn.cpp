// SPDX-License-Identifier: Apache-2.0
#include "polybus/adapter/read_turn.hpp"

#include <vector>

namespace polybus {

namespace {
thread_local ReadTurn* open_turn = nullptr;
// The open turns' tasks, innermost last; it keeps its capacity, so deferring allocates nothing
// once a few reads have come.
thread_local std::vector<ReadTurn::Task> deferred;
}  // namespace

ReadTurn::ReadTurn(const Strand& strand)
    : strand_(strand), outer_(open_turn), first_(deferred.size()), next_(first_) {
  open_turn = this;
}

void ReadTurn::finish() {
  run_deferred();
}

ReadTurn::~ReadTurn() {
  while (next_ < deferred.size()) {
    try {
      run_deferred();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a second exception cannot leave a destructor
    }
  }
  deferred.resize(first_);
  open_turn = outer_;
}

void ReadTurn::run_deferred() {
  // A task may defer more: the list grows, and may move, while one runs.
  while (next_ < deferred.size()) {
    Task task = std::move(deferred[next_++]);
    task();
  }
}

bool ReadTurn::open_on(const Strand& strand) {
  return open_turn && open_turn->strand_ == strand;
}

void ReadTurn::defer(Task task) {
  deferred.push_back(std::move(task));
}

}  // namespace polybus
