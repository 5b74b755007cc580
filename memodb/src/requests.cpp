// SPDX-License-Identifier: Apache-2.0
#include "requests.hpp"

#include "connection.hpp"
#include "polybus/error.hpp"

namespace polybus::memodb::detail {

using polybus::errc;

namespace {

// `now` on the client's clock, which the deadline is on.
std::int64_t remaining_ms(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  const auto left = deadline - now;
  return std::chrono::ceil<std::chrono::milliseconds>(left).count();
}

}  // namespace

void Requests::request(RequestWork work) {
  if (connection_.closing_) return work.done(make_error_code(errc::closed), {}, "client closed");
  if (auto ec = validate_service(work.topic))
    return work.done(make_error_code(errc::invalid_argument), {},
                     "memodb: service name '" + work.topic + "': " + ec.message());
  if (active_ >= connection_.settings_.max_requests) {
    // Waits for a free slot, up to its deadline (the core completes it then).
    waiting_.push_back(std::move(work));
  } else {
    start(std::move(work));
  }
  count_waiting();
}

void Requests::count_waiting() {
  auto& ctx = connection_.ctx_;
  if (connection_.closing_) return ctx.waiting_requests(0);
  // Those whose deadline passed have been failed by the core: they no longer wait.
  while (!waiting_.empty() && waiting_.front().done.done()) waiting_.pop_front();
  const bool up = connection_.socket_ && connection_.socket_->up();
  ctx.waiting_requests(waiting_.size() + (up ? 0 : active_));
}

void Requests::start(RequestWork work) {
  if (work.done.done()) return;
  const auto& settings = connection_.settings_;
  const std::int64_t left = remaining_ms(work.done.deadline(), connection_.ctx_.now());
  if (left <= 0) return work.done(make_error_code(errc::timeout), {}, "deadline passed");
  // The broker waits this long for the worker's RESULT: by default what is left of ours.
  const std::int64_t job_ms =
      settings.job_timeout.count() > 0 ? settings.job_timeout.count() : left;
  std::string message;
  if (auto ec = Requester::job(message, work.topic, static_cast<std::uint64_t>(job_ms)))
    return work.done(make_error_code(errc::invalid_argument), {}, ec.message());
  message.append(work.payload);

  RequestSlot* slot = nullptr;
  if (!idle_.empty()) {
    slot = idle_.back();
    idle_.pop_back();
  } else {
    auto fresh = std::make_unique<RequestSlot>(++next_key_);
    slot = fresh.get();
    slots_.emplace(slot->key, std::move(fresh));
  }
  // Resent only once the broker has surely dropped the job (queue wait + job time), so a slow
  // queue never has a worker run it twice; a dropped connection resends it at once.
  const auto resend = settings.queue_timeout + std::chrono::milliseconds(job_ms) + kResendMargin;
  ++active_;
  slot->done = std::move(work.done);
  slot->service = std::move(work.topic);
  slot->pending = true;
  connection_.ctx_.count_bytes_out(work.payload.size());
  const std::uint64_t key = slot->key;
  slot->exchange = connection_.socket_->exchange(
      std::move(message), resend, std::chrono::milliseconds(left), {},
      [weak = connection_.weak_from_this(), key](std::error_code ec, std::string reply,
                                                 std::string detail) {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        auto& requests = self->requests_;
        auto it = requests.slots_.find(key);
        if (it != requests.slots_.end())
          requests.completed(*it->second, ec, std::move(reply), std::move(detail));
      });
}

void Requests::completed(RequestSlot& slot, std::error_code ec, std::string reply,
                         std::string detail) {
  slot.pending = false;
  slot.exchange = 0;
  if (ec == make_error_code(errc::timeout))
    return finish(slot, ec, {},
                  "deadline passed before a RESULT came (no worker, the broker unreachable, or "
                  "the worker timed out: the broker drops such jobs without a word)");
  if (ec) return finish(slot, ec, {}, "memodb: " + detail);
  connection_.reconnect_.proven();  // the broker answered: the backoff starts over
  auto answer = Requester::answer(reply, slot.service);
  finish(slot, answer.ec, std::string(answer.payload), std::move(answer.why));
}

void Requests::finish(RequestSlot& slot, std::error_code ec, std::string reply,
                      std::string detail) {
  auto done = std::move(slot.done);
  slot.done = OpCompletion();
  slot.service.clear();
  --active_;
  if (idle_.size() < connection_.settings_.max_requests) {
    idle_.push_back(&slot);
  } else {
    const std::uint64_t key = slot.key;
    slots_.erase(key);  // nothing is pending on it
  }
  done(ec, std::move(reply), std::move(detail));
  pump();
  count_waiting();
  connection_.maybe_finish_close();
}

void Requests::pump() {
  while (!connection_.closing_ && active_ < connection_.settings_.max_requests &&
         !waiting_.empty()) {
    RequestWork work = std::move(waiting_.front());
    waiting_.pop_front();
    start(std::move(work));
  }
}

void Requests::close() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  connection_.ctx_.waiting_requests(0);
  for (auto& work : waiting) work.done(make_error_code(errc::closed), {}, "client closed");
  for (auto& [key, slot] : slots_) connection_.cancel(*slot);
}

void Requests::shutdown() {
  for (auto& [key, slot] : slots_) {
    auto done = std::move(slot->done);
    slot->done = OpCompletion();
    if (done) done(make_error_code(errc::closed), {}, "client closed");
  }
  for (auto& work : waiting_) work.done(make_error_code(errc::closed), {}, "client closed");
  waiting_.clear();
  connection_.ctx_.waiting_requests(0);
  idle_.clear();
  slots_.clear();
}

bool Requests::exchanging() const {
  return any_pending(slots_);
}

}  // namespace polybus::memodb::detail
