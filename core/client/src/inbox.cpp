// SPDX-License-Identifier: Apache-2.0
// PullSubscription and the inbox behind it.
#include "inbox.hpp"

#include <future>

#include "client_core.hpp"
#include "polybus/error.hpp"

namespace polybus {
namespace detail {

void Inbox::attach(const std::shared_ptr<SubscriptionCore>& core) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    core_ = core;
    bound_ = std::max<std::size_t>(core->max_in_flight(), 1);
  }
  // on_settled is the strand's: set there. An end that came first left the core inactive.
  asio::post(core->strand(), [core, weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    // Ended before this ran: refused at subscribe (its cause, as wait_ready says it), or closed.
    if (!core->active()) {
      const auto refused = core->ready_result();
      return self->end(refused && *refused ? *refused
                                           : Status(errc::closed, core->topic() + ": ended"));
    }
    core->on_settled([weak](const Status& status, bool ended) {
      auto inbox = weak.lock();
      if (!inbox || !ended) return;
      inbox->end(status ? status : Status(errc::closed, inbox->topic() + ": unsubscribed"));
    });
    core->on_closing([weak] {
      if (auto inbox = weak.lock()) inbox->give_back_waiting();
    });
  });
}

void Inbox::give_back(Message& message) const {
  // A request left unanswered reaches its requester as its deadline.
  if (message.responded() || message.expects_reply()) return;
  if (auto core = core_.lock(); core && core->acks())
    (void)message.nack(std::chrono::milliseconds(0));
}

void Inbox::deliver(Message& message) {
  message.take_manual_control();
  std::unique_lock<std::mutex> lock(mutex_);
  if (ended_) {
    lock.unlock();
    return give_back(message);
  }
  if (!receives_.empty()) {
    auto done = std::move(receives_.front().second);
    receives_.pop_front();
    lock.unlock();
    if (done) done(Status{}, message);
    return;
  }
  messages_.push_back(message);
  if (bound_ && !held_ && messages_.size() >= bound_) {
    held_ = true;
    auto core = core_.lock();
    lock.unlock();
    if (core) core->hold_for_pull(true);
  }
}

void Inbox::end(const Status& why) {
  std::deque<Message> left;
  std::deque<std::pair<std::uint64_t, ReceiveCompletion>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    ended_ = why;
    left.swap(messages_);
    waiting.swap(receives_);
  }
  for (auto& message : left) give_back(message);
  for (auto& [ticket, done] : waiting)
    if (done) done(why, Message{});
}

void Inbox::give_back_waiting() {
  std::deque<Message> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(messages_);
  }
  for (auto& message : left) give_back(message);
}

bool Inbox::taken_one() {
  if (!held_ || messages_.size() > bound_ / 2) return false;
  held_ = false;
  return true;
}

std::uint64_t Inbox::receive(ReceiveCompletion done) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = next_ticket_++;
  if (!messages_.empty()) {
    Message message = take_front(lock);
    if (done) done(Status{}, std::move(message));
    return ticket;
  }
  if (ended_) {
    const Status why = *ended_;
    lock.unlock();
    if (done) done(why, Message{});
    return ticket;
  }
  receives_.emplace_back(ticket, std::move(done));
  return ticket;
}

bool Inbox::cancel(std::uint64_t ticket) {
  ReceiveCompletion dropped;  // destroyed outside the lock: its captures are the application's
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = receives_.begin(); it != receives_.end(); ++it) {
    if (it->first != ticket) continue;
    dropped = std::move(it->second);
    receives_.erase(it);
    return true;
  }
  return false;
}

std::optional<Message> Inbox::try_receive() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (messages_.empty()) return std::nullopt;
  return take_front(lock);
}

Message Inbox::take_front(std::unique_lock<std::mutex>& lock) {
  Message message = std::move(messages_.front());
  messages_.pop_front();
  const bool resume = taken_one();
  auto core = core_.lock();
  lock.unlock();
  if (resume && core) core->hold_for_pull(false);
  return message;
}

std::pair<Status, Message> Inbox::receive_sync(std::chrono::milliseconds timeout) {
  if (auto message = try_receive()) return {Status{}, std::move(*message)};
  if (auto core = core_.lock(); core && core->on_io_context())
    return {Status(errc::would_block_io_thread,
                   "receive_sync from " + topic_ +
                       " on a thread that runs the client's io_context (its io thread, or a "
                       "thread of the application's ConnectOptions::io_context): the message "
                       "needs that thread; use receive() there"),
            Message{}};
  auto promise = std::make_shared<std::promise<std::pair<Status, Message>>>();
  auto future = promise->get_future();
  const auto ticket = receive([promise](const Status& status, Message message) {
    promise->set_value({status, std::move(message)});
  });
  if (future.wait_for(timeout) == std::future_status::ready) return future.get();
  // Taken back unless its message is on its way: then it is this caller's.
  if (cancel(ticket))
    return {Status(errc::timeout,
                   topic_ + ": no message within " + std::to_string(timeout.count()) + "ms"),
            Message{}};
  return future.get();
}

std::size_t Inbox::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_.size();
}

}  // namespace detail

namespace {
detail::Inbox& inbox_of(const std::shared_ptr<detail::Inbox>& inbox) {
  if (!inbox) throw Error(errc::invalid_argument, "empty polybus::PullSubscription");
  return *inbox;
}
}  // namespace

std::uint64_t PullSubscription::receive(ReceiveCompletion done) const {
  if (!inbox_) {
    if (done)
      done(Status(errc::invalid_argument, "receive on an empty PullSubscription"), Message{});
    return 0;
  }
  return inbox_->receive(std::move(done));
}
bool PullSubscription::cancel_receive(std::uint64_t ticket) const {
  return inbox_ && inbox_->cancel(ticket);
}
std::optional<Message> PullSubscription::try_receive() const {
  return inbox_of(inbox_).try_receive();
}
std::pair<Status, Message> PullSubscription::receive_sync(std::chrono::milliseconds timeout) const {
  return inbox_of(inbox_).receive_sync(timeout);
}
const std::string& PullSubscription::topic() const {
  return inbox_of(inbox_).topic();
}
std::size_t PullSubscription::waiting() const {
  return inbox_ ? inbox_->waiting() : 0;
}

}  // namespace polybus
