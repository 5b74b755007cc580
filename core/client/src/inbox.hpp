// SPDX-License-Identifier: Apache-2.0
// What a PullSubscription pulls from: the messages its subscription's handler took, and the
// receives waiting for one, matched in order under one lock.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "polybus/pull_subscription.hpp"

namespace polybus::detail {

class SubscriptionCore;

class Inbox : public std::enable_shared_from_this<Inbox> {
 public:
  explicit Inbox(std::string topic) : topic_(std::move(topic)) {}

  // Once the subscription exists: its bound, its pause, and its end (on its strand).
  void attach(const std::shared_ptr<SubscriptionCore>& core);
  // The subscription's handler, on a handler thread: keeps the message for a receive.
  void deliver(Message& message);
  // The subscription ended: waiting messages go back, waiting receives get `why`.
  void end(const Status& why);
  // The client began to close: waiting messages go back (nothing will take them), so that a
  // close that waits for messages in flight (NSQ's) does not wait for these.
  void give_back_waiting();

  std::uint64_t receive(ReceiveCompletion done);
  bool cancel(std::uint64_t ticket);
  std::optional<Message> try_receive();
  std::pair<Status, Message> receive_sync(std::chrono::milliseconds timeout);
  const std::string& topic() const { return topic_; }
  std::size_t waiting() const;

 private:
  // With mutex_ held: a message was taken; says whether the subscription may resume.
  bool taken_one();
  // The first message held, taken under `lock`, which it unlocks before it lets the broker send
  // again (taken_one): the subscription's lock is never taken under the inbox's.
  Message take_front(std::unique_lock<std::mutex>& lock);
  void give_back(Message& message) const;

  const std::string topic_;
  mutable std::mutex mutex_;
  std::deque<Message> messages_;
  std::deque<std::pair<std::uint64_t, ReceiveCompletion>> receives_;
  std::uint64_t next_ticket_ = 1;
  std::optional<Status> ended_;
  std::size_t bound_ = 0;  // 0 until attached
  bool held_ = false;      // the broker is held back: the inbox filled up
  std::weak_ptr<SubscriptionCore> core_;
};

}  // namespace polybus::detail
