// SPDX-License-Identifier: Apache-2.0
#include "handler_pool.hpp"

#include <algorithm>

namespace polybus::detail {

namespace {
// The queue of the pool whose job this thread runs, if any.
thread_local const void* running_pool = nullptr;
}  // namespace

bool HandlerPool::on_own_thread() const {
  return running_pool == queue_.get();
}

HandlerPool::~HandlerPool() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stopping = true;
  }
  queue_->wake.notify_all();
  for (auto& thread : threads_) {
    if (thread.get_id() == std::this_thread::get_id())
      thread.detach();
    else
      thread.join();
  }
}

void HandlerPool::reserve(std::size_t n) {
  std::lock_guard<std::mutex> lock(threads_mutex_);
  n = std::min(n, max_threads_);
  while (threads_.size() < n) threads_.emplace_back([queue = queue_] { run(queue); });
}

void HandlerPool::post(Job job) {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->jobs.push_back(std::move(job));
  }
  queue_->wake.notify_one();
}

void HandlerPool::run(const std::shared_ptr<Queue>& queue) {
  running_pool = queue.get();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(queue->mutex);
      queue->wake.wait(lock, [&] { return queue->stopping || !queue->jobs.empty(); });
      if (queue->jobs.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue->jobs.front());
      queue->jobs.pop_front();
      ++queue->running;
    }
    try {
      job();
    } catch (const std::exception& e) {
      if (queue->on_escaped) queue->on_escaped(e.what());
    } catch (...) {
      if (queue->on_escaped) queue->on_escaped("a non-standard exception");
    }
    job = Job();  // its captures (a subscription, the client) go before it counts as done
    std::vector<std::function<void()>> idle;
    {
      std::lock_guard<std::mutex> lock(queue->mutex);
      if (--queue->running == 0 && queue->jobs.empty()) idle.swap(queue->idle_waiters);
    }
    for (auto& fn : idle) fn();
  }
}

void HandlerPool::when_idle(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->running != 0 || !queue_->jobs.empty()) {
      queue_->idle_waiters.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace polybus::detail
