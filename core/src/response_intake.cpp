#include "response_intake.hpp"

#include <asio/post.hpp>

#include "client_shared.hpp"

namespace polybus::detail {

void ResponseIntake::push(Task task, const std::shared_ptr<ClientShared>& owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool first = pending_.empty();
  pending_.push_back(std::move(task));
  // Posted under the lock: an answer that finds the intake non-empty knows a drain is queued
  // ahead of whatever its thread posts next.
  if (first) asio::post(owner->strand, [owner] { owner->responses.drain(); });
}

void ResponseIntake::drain() {
  // Taken into a local vector: should a task throw, the rest go with the exception instead of
  // blocking the next drain.
  std::vector<Task> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(pending_);
    pending_.swap(spare_);
  }
  for (auto& task : taken) task();
  taken.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  if (spare_.capacity() < taken.capacity()) spare_.swap(taken);
}

}  // namespace polybus::detail
