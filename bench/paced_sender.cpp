// SPDX-License-Identifier: Apache-2.0
#include "paced_sender.hpp"

#include <algorithm>

#include "payload_stamp.hpp"

namespace polybus::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::int64_t micros_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

}  // namespace

struct PacedSender::Producer {
  PacedProducer target;
  std::uint32_t in_flight = 0;  // under the thread's mutex
};

// One thread's producers, sent to in turn at its share of the rate.
struct PacedSender::Thread : std::enable_shared_from_this<Thread> {
  std::vector<std::unique_ptr<Producer>> producers;
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t in_flight = 0;
  std::thread thread;
};

PacedSender::PacedSender(std::vector<PacedProducer> producers, std::vector<std::string> payloads,
                         PacedSenderSettings settings, PacedSenderHooks hooks)
    : payloads_(std::move(payloads)),
      settings_(settings),
      hooks_(std::make_shared<const PacedSenderHooks>(std::move(hooks))),
      rate_(settings.rate) {
  if (producers.empty() || payloads_.empty()) {
    sending_.store(false);
    return;
  }
  const std::size_t count = std::max<std::size_t>(1, std::min(settings.threads, producers.size()));
  for (std::size_t i = 0; i < count; ++i) threads_.push_back(std::make_shared<Thread>());
  for (std::size_t i = 0; i < producers.size(); ++i)
    threads_[i % count]->producers.push_back(
        std::make_unique<Producer>(Producer{std::move(producers[i])}));
  try {
    for (auto& owned : threads_) {
      Thread* thread = owned.get();
      thread->thread = std::thread([this, thread] { send_loop(*thread); });
    }
  } catch (...) {  // no thread to be had: those started end before the error goes on
    stop(std::chrono::milliseconds(0));
    throw;
  }
}

PacedSender::~PacedSender() {
  stop(std::chrono::seconds(10));
}

void PacedSender::send_loop(Thread& pt) {
  auto due = SteadyClock::now(), last_wake = due;
  std::size_t turn = 0;
  std::uint64_t payload_turn = 0;
  while (sending_.load()) {
    // This thread's share of the rate, read each message: it may change at any time.
    const double share = std::max(1e-3, rate_.load()) / static_cast<double>(threads_.size());
    due += std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(1.0 / share));
    // Not due yet: sleeps until it is, or until a tick after the last wake when that is later
    // (the messages due meanwhile then go together), in steps, so that the end is not held up
    // by a slow rate.
    if (SteadyClock::now() < due) {
      const auto wake = std::max(due, last_wake + settings_.tick);
      while (SteadyClock::now() < wake && sending_.load())
        std::this_thread::sleep_until(
            std::min(wake, SteadyClock::now() + std::chrono::milliseconds(50)));
      last_wake = SteadyClock::now();
    }
    Producer& producer = *pt.producers[turn++ % pt.producers.size()];
    {
      std::unique_lock<std::mutex> lock(pt.mutex);
      pt.cv.wait(lock, [&] { return producer.in_flight < settings_.window || !sending_.load(); });
      if (!sending_.load()) break;
      ++producer.in_flight;
      ++pt.in_flight;
    }
    // This message, and with batches the others already due (as many as the window takes).
    const auto sent = SteadyClock::now();
    std::vector<std::string> batch;
    std::vector<std::size_t> sizes;
    const auto add = [&](SteadyClock::time_point was_due) {
      if (hooks_->on_send)
        hooks_->on_send(std::max<std::int64_t>(0, micros_between(was_due, sent)));
      std::string payload = payloads_[payload_turn++ % payloads_.size()];
      sizes.push_back(payload.size());
      stamp_payload(payload, sequence_++, wall_clock_ns() + settings_.stamp_shift_ns);
      batch.push_back(std::move(payload));
    };
    add(due);
    while (batch.size() < settings_.max_batch) {
      const auto next = due + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(1.0 / share));
      if (next > sent) break;
      {
        std::lock_guard<std::mutex> lock(pt.mutex);
        if (producer.in_flight >= settings_.window) break;
        ++producer.in_flight;
        ++pt.in_flight;
      }
      due = next;
      add(due);
    }
    // Holds what it touches: it may run after the sender is gone.
    auto done = [hooks = hooks_, pt = pt.shared_from_this(), p = &producer, sent,
                 sizes = std::move(sizes)](bool ok, const std::string& error) {
      const auto latency = micros_between(sent, SteadyClock::now());
      for (const std::size_t bytes : sizes) {
        if (ok && hooks->on_published) hooks->on_published(bytes, latency);
        if (!ok && hooks->on_failed) hooks->on_failed(error);
      }
      std::lock_guard<std::mutex> lock(pt->mutex);
      p->in_flight -= static_cast<std::uint32_t>(sizes.size());
      pt->in_flight -= sizes.size();
      pt->cv.notify_all();
    };
    if (settings_.requests)
      producer.target.client.request(
          producer.target.topic, std::move(batch.front()),
          [done = std::move(done)](Reply reply) { done(!reply.ec, reply.status().message()); });
    else if (batch.size() == 1)
      producer.target.client.publish(
          producer.target.topic, std::move(batch.front()),
          [done = std::move(done)](const Status& status) { done(!status, status.message()); });
    else
      producer.target.client.publish_batch(
          producer.target.topic, std::move(batch),
          [done = std::move(done)](const Status& status) { done(!status, status.message()); });
  }
}

bool PacedSender::stop(std::chrono::milliseconds drain) {
  if (stopped_) return drained_;
  stopped_ = true;
  sending_.store(false);
  for (auto& pt : threads_) {
    if (!pt->thread.joinable()) continue;
    {
      std::lock_guard<std::mutex> lock(pt->mutex);
      pt->cv.notify_all();
    }
    pt->thread.join();
  }
  const auto until = SteadyClock::now() + drain;
  bool drained = true;
  for (auto& pt : threads_) {
    std::unique_lock<std::mutex> lock(pt->mutex);
    drained = pt->cv.wait_until(lock, until, [&] { return pt->in_flight == 0; }) && drained;
  }
  drained_ = drained;
  return drained;
}

}  // namespace polybus::bench
