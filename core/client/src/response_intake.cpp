// SPDX-License-Identifier: Apache-2.0
#include "response_intake.hpp"

#include <asio/post.hpp>

#include "client_shared.hpp"

namespace polybus::detail {

namespace {
// The intake whose Turn this thread is in (at most one: turns do not nest).
thread_local ResponseIntake* turn_intake = nullptr;
}  // namespace

ResponseIntake::Turn::Turn(ResponseIntake& intake, const ClientShared& shared)
    : intake_(intake), shared_(shared), previous_(turn_intake) {
  turn_intake = &intake;
}

ResponseIntake::Turn::~Turn() {
  turn_intake = previous_;
  intake_.drain(shared_);
}

bool ResponseIntake::turn_under_way() const {
  return turn_intake == this;
}

void ResponseIntake::push(Task task, ClientShared& owner) {
  const bool in_turn = turn_under_way();
  std::lock_guard<BriefMutex> lock(mutex_);
  const bool first = pending_.empty();
  pending_.push_back(std::move(task));
  // Posted under the lock: an answer that finds the intake non-empty knows a drain is queued
  // ahead of whatever its thread posts next, or a Turn's end drains it.
  if (first && !in_turn)
    asio::post(owner.strand, in_memory(drain_memory_, [owner = owner.shared_from_this()] {
                 owner->responses.drain(*owner);
               }));
}

void ResponseIntake::drain(const ClientShared& shared) {
  std::vector<Task> taken;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    taken.swap(pending_);
    pending_.swap(spare_);
  }
  // One answer that fails (an adapter's exception) is said, and the others still go: dropped
  // with it, their messages would wait in flight until the broker's timeout.
  for (auto& task : taken) {
    try {
      task();
    } catch (const std::exception& e) {
      shared.log(
          LogLevel::error,
          std::string("an answer to a message (ack, nack, touch or reply) failed: ") + e.what());
    } catch (...) {
      shared.log(LogLevel::error,
                 "an answer to a message (ack, nack, touch or reply) failed: a non-standard "
                 "exception");
    }
  }
  taken.clear();
  std::lock_guard<BriefMutex> lock(mutex_);
  if (spare_.capacity() < taken.capacity()) spare_.swap(taken);
}

}  // namespace polybus::detail
