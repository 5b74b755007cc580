// SPDX-License-Identifier: Apache-2.0
// Internal: the io thread a client owns unless the caller supplied an io_context. Every object
// that holds io objects (timers, sockets) keeps this alive through ClientShared, so the
// io_context is destroyed only after all of them.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace polybus::detail {

struct Runtime {
  std::unique_ptr<asio::io_context> own;
  asio::io_context* io = nullptr;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  // Told of an exception that left a handler of the owned io thread (every user callback is
  // caught before; this is what an adapter let through). Set before start(), read-only after.
  std::function<void(const std::string&)> on_escaped;

  // Starts the owned io thread; the thread keeps the runtime alive until run() returns. An
  // exception out of a handler is reported and run() goes on: the io thread never dies of one.
  static void start(const std::shared_ptr<Runtime>& runtime);
  // Lets the io thread finish the work it has (up to `deadline`, then stops it) and joins it.
  // From the io thread itself: only releases the work guard.
  void finish(std::chrono::steady_clock::time_point deadline);
  // Lets the io thread end once its work is done, without waiting for it: from a thread the
  // close still needs (the io thread, a handler thread), the last handle's destructor.
  void let_go();
  bool on_io_thread() const { return thread.get_id() == std::this_thread::get_id(); }
  ~Runtime();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ran_out_ = false;
};

}  // namespace polybus::detail
