// SPDX-License-Identifier: Apache-2.0
// A few io threads for every client of a benchmark run, handed out in turn: a thousand
// connections need not be a thousand threads. The pool outlives the clients given its contexts
// (ConnectOptions::io_context): their owner closes them before the pool goes.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <memory>
#include <thread>
#include <vector>

namespace polybus::bench {

class IoPool {
 public:
  explicit IoPool(std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      auto io = std::make_unique<asio::io_context>(1);
      guards_.emplace_back(asio::make_work_guard(*io));
      threads_.emplace_back([raw = io.get()] { raw->run(); });
      contexts_.push_back(std::move(io));
    }
  }
  ~IoPool() {
    for (auto& guard : guards_) guard.reset();
    for (auto& io : contexts_) io->stop();
    for (auto& thread : threads_) thread.join();
  }
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  asio::io_context* next() { return contexts_[next_++ % contexts_.size()].get(); }

 private:
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::size_t next_ = 0;
};

}  // namespace polybus::bench
