// SPDX-License-Identifier: Apache-2.0
// Work that a read sets off, done before the read's handler returns. A read on a consumer's
// connection brings messages, their handlers run on the strand (handler_thread=io), and their
// acks make a write. Posted, each of these steps is a turn of the event loop of its own, and
// asio polls the reactor between two turns (an epoll_wait each). Deferred into the read's turn,
// a read costs one wake-up with all it sets off. The transport opens a turn around a read's
// handling on its strand; with no turn open on that strand, the caller posts as before.
#pragma once

#include <cstddef>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/inplace_function.hpp"
#include "polybus/export.hpp"

namespace polybus {

class POLYBUS_API ReadTurn {
 public:
  using Task = detail::InplaceFunction<void(), 32>;

  // In a handler on `strand`, which outlives the turn.
  explicit ReadTurn(const Strand& strand);
  // Runs what was deferred, and what that defers, in order. An exception leaves as one from a
  // posted handler would; the tasks after it run as the turn is destroyed.
  void finish();
  // Runs what finish() did not (an exception unwound past it), each task's exception dropped.
  ~ReadTurn();
  ReadTurn(const ReadTurn&) = delete;
  ReadTurn& operator=(const ReadTurn&) = delete;

  // On `strand`: whether a turn of that strand is open on this thread, to defer() into.
  static bool open_on(const Strand& strand);
  // After open_on() said true: `task` runs as that turn finishes.
  static void defer(Task task);

 private:
  void run_deferred();

  const Strand& strand_;
  ReadTurn* outer_;
  std::size_t first_;  // where this turn's tasks begin in the thread's list
  std::size_t next_;   // the next of them to run
};

}  // namespace polybus
