// SPDX-License-Identifier: Apache-2.0
// Internal: the io thread a client owns unless the caller supplied an io_context. Every object
// that holds io objects (timers, sockets) keeps this alive through ClientShared, so the
// io_context is destroyed only after all of them.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace polybus::detail {

struct Runtime {
  std::unique_ptr<asio::io_context> own;
  asio::io_context* io = nullptr;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;

  // Starts the owned io thread; the thread keeps the runtime alive until run() returns.
  static void start(const std::shared_ptr<Runtime>& runtime);
  // Lets the io thread finish the work it has (up to `bound`, then stops it) and joins it.
  // From the io thread itself: only releases the work guard.
  void finish(std::chrono::milliseconds bound);
  bool on_io_thread() const { return thread.get_id() == std::this_thread::get_id(); }
  ~Runtime();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ran_out_ = false;
};

}  // namespace polybus::detail
