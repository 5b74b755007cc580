// SPDX-License-Identifier: Apache-2.0
// Internal: the answers to messages (ack, nack, touch, reply) on their way from handler threads
// to the client's strand, where the adapter sends them. Like the publish intake: only the first
// answer into an empty intake posts a drain, so a burst of acks costs one post (and at most one
// wake of the io thread) instead of one each, and an answer allocates nothing (it is kept inline
// in a vector that keeps its capacity). Answers run on the strand in the order they came in.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "brief_mutex.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/adapter/inplace_function.hpp"

namespace polybus::detail {

class ClientShared;

class ResponseIntake {
 public:
  using Task = InplaceFunction<void(), 96>;

  // Any thread. `owner` owns this intake; the drain it posts holds it. Nothing is posted
  // while a Turn of this intake is under way on the calling thread: the Turn drains it.
  void push(Task task, ClientShared& owner);
  // A handler_thread=io turn of a subscription, on the strand: the answers its handlers give
  // run when it ends, with no post and no turn of the event loop of their own. Its handlers
  // have returned by then, so an answer's callbacks (an error, a completion) never run inside
  // one.
  class Turn {
   public:
    Turn(ResponseIntake& intake, const ClientShared& shared);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    ResponseIntake& intake_;
    const ClientShared& shared_;
    ResponseIntake* previous_;
  };

  // Answers are on their way: their drain is queued on the strand already.
  bool waiting() const {
    std::lock_guard<BriefMutex> lock(mutex_);
    return !pending_.empty();
  }

 private:
  void drain(const ClientShared& shared);  // strand
  bool turn_under_way() const;             // a Turn of this intake, on this thread

  mutable BriefMutex mutex_;
  std::vector<Task> pending_;  // guarded by mutex_
  std::vector<Task> spare_;    // guarded by mutex_: an empty one, reused
  // The one drain posted at a time, and the idle strand's invoker: from a handler thread,
  // which has no asio cache, each took the heap.
  HandlerMemory drain_memory_;
};

}  // namespace polybus::detail
