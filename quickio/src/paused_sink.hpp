// SPDX-License-Identifier: Apache-2.0
// A subscription's events while it is paused. QuickIO has no flow control and the server keeps
// nothing for a client, so pausing cannot ask the server to hold events: the subscription stays
// on the server and its events are held here, in order, up to a byte bound, and handed on at
// resume. Past the bound further events are dropped and reported once per pause, as nats.c
// reports a slow consumer. Everything runs on the adapter's strand.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "polybus/adapter/adapter.hpp"
#include "polybus/quickio/client_errc.hpp"

namespace polybus::quickio::detail {

class PausableSink : public SubscriptionSink {
 public:
  PausableSink(std::shared_ptr<SubscriptionSink> target, std::size_t max_held_bytes,
               AdapterContext context, std::string path)
      : target_(std::move(target)),
        max_held_bytes_(max_held_bytes),
        ctx_(std::move(context)),
        path_(std::move(path)) {}

  void deliver(Message message) override {
    if (!paused_) return target_->deliver(std::move(message));
    const std::size_t size = message.payload().size() + kPerEventOverhead;
    if (held_bytes_ + size > max_held_bytes_) {
      if (dropped_++ == 0)
        ctx_.error(make_error_code(client_errc::queue_full),
                   "quickio: paused subscription to " + path_ + " holds " +
                       std::to_string(held_bytes_) +
                       " bytes (max_held_bytes); later events are dropped until resume");
      return;
    }
    held_bytes_ += size;
    held_.push_back(std::move(message));
  }
  void ready(std::error_code ec, const std::string& detail) override { target_->ready(ec, detail); }
  void ended(std::error_code ec, const std::string& detail) override { target_->ended(ec, detail); }

  void pause() { paused_ = true; }
  void resume() {
    paused_ = false;
    auto held = std::move(held_);
    held_.clear();
    held_bytes_ = 0;
    for (auto& message : held) target_->deliver(std::move(message));
    if (dropped_ > 0)
      ctx_.log(LogLevel::warn, "quickio: " + std::to_string(dropped_) + " event(s) to " + path_ +
                                   " dropped while paused (max_held_bytes)");
    dropped_ = 0;
  }

 private:
  static constexpr std::size_t kPerEventOverhead = 64;  // a held message's bookkeeping, roughly

  std::shared_ptr<SubscriptionSink> target_;
  std::size_t max_held_bytes_;
  AdapterContext ctx_;
  std::string path_;
  bool paused_ = false;
  std::deque<Message> held_;
  std::size_t held_bytes_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace polybus::quickio::detail
