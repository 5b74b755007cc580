// SPDX-License-Identifier: Apache-2.0
#include "runtime.hpp"

namespace polybus::detail {

void Runtime::start(const std::shared_ptr<Runtime>& runtime) {
  runtime->thread = std::thread([runtime] {
    for (;;) {
      try {
        runtime->io->run();
        break;
      } catch (const std::exception& e) {
        if (runtime->on_escaped) runtime->on_escaped(e.what());
      } catch (...) {
        if (runtime->on_escaped) runtime->on_escaped("a non-standard exception");
      }
    }
    std::lock_guard<std::mutex> lock(runtime->mutex_);
    runtime->ran_out_ = true;
    runtime->cv_.notify_all();
  });
}

void Runtime::let_go() {
  if (own) work.reset();
}

void Runtime::finish(std::chrono::steady_clock::time_point deadline) {
  if (!own) return;
  work.reset();
  if (!thread.joinable() || on_io_thread()) return;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Normally the closed client has no work left and run() returns at once.
    if (!cv_.wait_until(lock, deadline, [&] { return ran_out_; })) own->stop();
  }
  thread.join();
}

Runtime::~Runtime() {
  work.reset();
  if (thread.joinable()) {
    // The last reference can be the io thread's own, released as it exits.
    if (on_io_thread())
      thread.detach();
    else {
      if (own) own->stop();
      thread.join();
    }
  }
}

}  // namespace polybus::detail
