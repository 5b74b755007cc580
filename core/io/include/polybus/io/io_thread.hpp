// SPDX-License-Identifier: Apache-2.0
// An io_context with a thread of its own, and a way for other threads to run something on it and
// wait for the result. The in-process brokers keep all their state on this thread, so nothing but
// the hand-over needs a lock.
#pragma once

#include "polybus/export.hpp"

#include <asio.hpp>
#include <future>
#include <thread>
#include <type_traits>
#include <utility>

namespace polybus {

class POLYBUS_API IoThread {
 public:
  IoThread() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}

  // Joins the thread. Everything posted must have finished by then: the owner closes its sockets
  // and cancels its timers (see run()) before this runs.
  ~IoThread() { join(); }

  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  asio::io_context& context() { return io_; }
  bool on_this_thread() const { return thread_.get_id() == std::this_thread::get_id(); }

  // Runs `fn` on the io thread and returns its result (or rethrows its exception). Called on the
  // io thread itself, it runs `fn` directly.
  template <typename Fn>
  auto run(Fn&& fn) -> std::invoke_result_t<Fn&> {
    using Result = std::invoke_result_t<Fn&>;
    if (on_this_thread()) return fn();
    std::packaged_task<Result()> task(std::forward<Fn>(fn));
    std::future<Result> result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

  // Lets run() return once no work is left, and waits for it.
  void join() {
    if (!thread_.joinable()) return;
    work_.reset();
    thread_.join();
  }

  // Stops at once, leaving what is still queued unrun (destroyed with the io_context), and waits.
  void stop_and_join() {
    if (!thread_.joinable()) return;
    work_.reset();
    io_.stop();
    thread_.join();
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace polybus
