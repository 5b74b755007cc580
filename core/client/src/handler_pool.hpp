// SPDX-License-Identifier: Apache-2.0
// Internal: the threads that run message handlers, so a slow handler never stalls the io strand.
// Grows on demand to the concurrency that subscriptions ask for.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/inplace_function.hpp"

namespace polybus::detail {

class HandlerPool {
 public:
  // A job in place, in a queue that keeps its memory: a wake of a subscription's handler comes
  // once per burst of messages, and a std::function holding a shared_ptr allocated for each.
  using Job = InplaceFunction<void(), 64>;

  explicit HandlerPool(std::size_t max_threads) : max_threads_(max_threads) {}
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Makes sure at least n threads exist (capped at max_threads).
  void reserve(std::size_t n);
  void post(Job job);
  // This thread is one of this pool's.
  bool on_own_thread() const;
  // Calls fn once no job is queued or running and every job's captures are gone (at once on this
  // thread when that is now, else on the pool thread that finished the last one): what a close
  // waits for before it says it is done, so that no pool thread still holds the client then.
  void when_idle(std::function<void()> fn);
  // Told of an exception that left a job (each job catches what user code throws; this is the
  // net under it): the thread reports it and goes on. Set before the first post.
  void set_on_escaped(std::function<void(const std::string&)> report) {
    queue_->on_escaped = std::move(report);
  }

 private:
  // Shared with the threads: the pool may be destroyed from one of its own threads (a handler
  // dropping the last reference to the client), which then finishes on its own.
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    Fifo<Job> jobs;
    std::size_t running = 0;  // jobs taken and not yet destroyed
    std::vector<std::function<void()>> idle_waiters;
    bool stopping = false;
    std::function<void(const std::string&)> on_escaped;
  };
  static void run(const std::shared_ptr<Queue>& queue);

  const std::size_t max_threads_;
  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::mutex threads_mutex_;
  std::vector<std::thread> threads_;
};

}  // namespace polybus::detail
