// SPDX-License-Identifier: Apache-2.0
// A subscription's dispatch: what the adapter delivers is queued for the handler pool (or run on
// the io thread), each message's envelope is opened on its handler thread, and the handler is
// called, its outcome acked, replied or handed to the retries.
#include <algorithm>
#include <array>
#include <asio/post.hpp>
#include <optional>
#include <utility>

#include "client_core.hpp"
#include "middleware_chain.hpp"
#include "polybus/cloudevents.hpp"
#include "polybus/error.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

namespace {
// The subscription whose handler this thread runs (SubscriptionCore::current()): set and read on
// the handler's own thread, in handle().
thread_local SubscriptionCore* running_subscription = nullptr;

struct RunningSubscription {
  explicit RunningSubscription(SubscriptionCore* sub) : previous(running_subscription) {
    running_subscription = sub;
  }
  ~RunningSubscription() { running_subscription = previous; }
  SubscriptionCore* previous;
};
}  // namespace

thread_local bool SubscriptionCore::joined_batch_ = false;

SubscriptionCore* SubscriptionCore::current() {
  return running_subscription;
}

SubscriptionCore::SubscriptionCore(std::shared_ptr<ClientCore> client, std::string topic,
                                   std::string group, Handlers handlers, std::uint32_t concurrency,
                                   std::uint32_t max_in_flight, std::uint32_t max_attempts,
                                   DiscardCallback on_discard, DeadLetter dead_letter,
                                   const Budget& budget)
    : client_(client),
      shared_(client->shared()),
      pool_(client->pool()),
      topic_(std::move(topic)),
      group_(std::move(group)),
      serving_(static_cast<bool>(handlers.serve)),
      cells_(std::make_shared<SubscriptionCells>()),
      batch_handler_(std::move(handlers.batch)),
      batch_options_(handlers.batch_options),
      max_in_flight_(max_in_flight),
      on_io_thread_(client->handlers_on_io_thread()),
      concurrency_(on_io_thread_ ? 1 : std::max<std::uint32_t>(1, concurrency)),
      max_attempts_(max_attempts),
      on_discard_(std::move(on_discard)),
      dead_letter_(std::move(dead_letter)),
      max_held_messages_(budget.max_held_messages),
      max_held_bytes_(budget.max_held_bytes) {
  pool_->reserve(concurrency_);
  if (serving_ && client->topic_requests()) {
    reply_route_ = client->topic_requests();
    routes_replies_ = true;
  }
  // The middleware wraps the handler once, here: an empty chain costs nothing per message.
  if (serving_)
    serve_handler_ = wrap_serve_handler(handlers.middleware, std::move(handlers.serve));
  else if (batch_handler_)
    handler_ = wrap_handler(handlers.middleware, [this](Message& m) { join_batch(m); });
  else
    handler_ = wrap_handler(handlers.middleware, std::move(handlers.handler));
}

void SubscriptionCore::deliver(Message message) {
  ++shared_->stats.received;
  bump(cells_->received);
  if (auto* state = detail::state_of(message).get()) {
    state->subscription_cells = cells_;
    if (routes_replies_) {  // answered through the client, settled through the adapter
      state->expects_reply = true;
      state->request_backend = std::move(state->backend);
      state->backend = reply_route_;
    }
  }
  if (!active_.load()) return release(message);
  if (max_attempts_ > 0 && message.attempts() > max_attempts_ && !message.expects_reply()) {
    std::string reason = "delivered " + std::to_string(message.attempts()) +
                         " times, more than max_attempts=" + std::to_string(max_attempts_);
    pool_->post([self = shared_from_this(), message, reason = std::move(reason)]() mutable {
      self->open_envelope(message);
      self->give_up(std::move(message), reason);
    });
    return;
  }
  enqueue(std::move(message));
}

void SubscriptionCore::enqueue(Message message) {
  bool start = false;
  std::string over_text;  // logged outside the lock: a log sink may call back into the client
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    held_bytes_ += message.payload().size();
    queue_.push_back(std::move(message));
    if (running_ < concurrency_ && !held_back()) {
      ++running_;
      start = true;
    }
    over_text = check_over_budget();
  }
  if (!over_text.empty()) {
    shared_->log(LogLevel::warn, over_text);
    apply_flow();
  }
  // A handler thread is woken once the strand's turn ends, not for the first message of it: the
  // rest of a read's messages are queued by then, and it takes them in one wake-up. Woken at
  // once, it drained the queue faster than the io thread filled it and slept again, a context
  // switch each way for every few messages.
  if (!start) return;
  if (on_io_thread_) return post_run_queue();  // after this turn, as below
  asio::post(shared_->strand, in_memory(wake_memory_, [self = shared_from_this()] {
               self->pool_->post([self] { self->run_queue(); });
             }));
}

void SubscriptionCore::post_run_queue() {
  if (on_io_thread_)
    asio::post(shared_->strand,
               in_memory(wake_memory_, [self = shared_from_this()] { self->run_queue(); }));
  else
    pool_->post([self = shared_from_this()] { self->run_queue(); });
}

void SubscriptionCore::run_queue() {
  // On the io thread a turn takes a bounded number, and a bounded time, so reads, timers, other
  // subscriptions and the writes its handlers made (their acks leave when the turn ends)
  // interleave with a long queue or slow handlers.
  constexpr std::uint32_t kMaxPerTurn = 64;
  constexpr auto kMaxTurn = std::chrono::milliseconds(1);
  Clock::time_point turn_ends = Clock::time_point::max(), returned = Clock::time_point::min();
  // Handlers an unsubscribe or a close let go of while this one ran: destroyed after the lock
  // is released.
  DroppedHandlers dropped;
  // On the io thread the turn's acks, nacks and replies run as it ends, with no turn of the
  // event loop of their own.
  std::optional<ResponseIntake::Turn> answers;
  if (on_io_thread_) answers.emplace(shared_->responses, *shared_);
  // The one handler thread of a subscription with concurrency 1 takes up to kTakeAtOnce
  // messages under one lock: the io thread queues under the same lock, and taking one per lock
  // would have the two take it in turn for every message. With more handler threads each takes
  // one at a time, so that no thread holds messages while another is free to run them. What a
  // pause or a cool-down finds still taken goes back to the front of the queue.
  constexpr std::size_t kTakeAtOnce = 16;
  std::array<Message, kTakeAtOnce> taken_together;
  std::size_t next = 0, count = 0, handled_bytes = 0;
  for (std::uint32_t handled = 0;; ++handled) {
    if (on_io_thread_ && (handled == kMaxPerTurn || returned > turn_ends))
      return post_run_queue();  // still running_
    Message message;
    if (next < count && !(held_back() && active_.load())) {
      message = std::move(taken_together[next++]);
      taken_waiting_.fetch_sub(1);
      handled_bytes += message.payload().size();
      if (shared_->caps.touch) ahead_handed_.store(next, std::memory_order_relaxed);
    } else {
      std::lock_guard<BriefMutex> lock(mutex_);
      if (count > 0) {
        taken_waiting_.fetch_sub(count - next);
        while (count > next) give_back_taken(std::move(taken_together[--count]));
        settle_taken_ahead(handled_bytes);
        next = count = handled_bytes = 0;
      }
      if (queue_.empty() || (held_back() && active_.load())) {
        ahead_spent_.clear();  // under the lock: another handler thread may run once it is free
        --running_;
        take_handlers_if_idle(dropped);
        // Only a close waits for handlers to fall idle: posting this on every idle moment
        // woke the io thread once per burst of messages. The state is read after running_ was
        // lowered, and close() sets it before its own check_drain(), so one of the two sees
        // the subscription idle.
        if (running_ == 0) {
          auto client = client_.lock();
          if (client && client->closing())
            asio::post(shared_->strand, [client] { client->check_drain(); });
        }
        return;
      }
      message = std::move(queue_.front());
      queue_.pop_front();
      taken(message);
      const std::size_t more =
          on_io_thread_ || concurrency_ > 1 ? 0 : std::min(kTakeAtOnce, queue_.size());
      for (; count < more; ++count) {
        taken_together[count] = std::move(queue_.front());
        queue_.pop_front();
      }
      if (count > 0) {
        taken_waiting_.fetch_add(count);
        taken_ahead(taken_together.data(), count);
      }
    }
    ahead_spent_.clear();
    if (!active_.load()) {
      release(message);
      continue;
    }
    returned = handle(message, returned);
    // Timed from the first handler's return: no clock read of its own.
    if (turn_ends == Clock::time_point::max()) turn_ends = returned + kMaxTurn;
  }
}

void SubscriptionCore::open_envelope(Message& message) {
  auto& state = *detail::state_of(message);
  if (!shared_->envelope.on() || state.envelope_read) return;
  state.envelope_read = true;
  std::string why;
  if (!shared_->envelope.unwrap(state, why)) {
    ++shared_->stats.delivered_raw;
    bump(cells_->delivered_raw);
    if (shared_->logs(LogLevel::debug))
      shared_->log(LogLevel::debug,
                   topic_ + ": a message is not an envelope (" + why + "): delivered raw");
  }
}

Clock::time_point SubscriptionCore::handle(Message& message, Clock::time_point started) {
  // Opening an envelope is not the handler's time: read the clock after it.
  if (shared_->envelope.on()) started = Clock::time_point::min();
  open_envelope(message);
  const RunningSubscription running(this);
  const auto& caps = shared_->caps;
  const auto trace_scope = shared_->envelope.extract(message);
  if (started == Clock::time_point::min()) started = Clock::now();
  Clock::time_point returned = started;
  const bool batching = static_cast<bool>(batch_handler_);
  auto handler_returned = [&] {
    returned = Clock::now();
    if (!batching) cells_->handler_time.observe(returned - started);  // a batch's: run_batch
  };
  if (serve_handler_) {
    if (routes_replies_ && !TopicRequests::answerable(message.headers())) {
      detail_reply_error(message, "no route for the reply");  // said and settled by the route
      return returned;
    }
    try {
      std::string reply = serve_handler_(message);
      handler_returned();
      if (!detail::state_of(message)->manual.load() && !message.responded())
        message.reply(std::move(reply));
    } catch (const std::exception& e) {
      handler_returned();
      if (!message.responded()) detail_reply_error(message, e.what());
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": serve handler threw: " + e.what());
    } catch (...) {
      handler_returned();
      if (!message.responded()) detail_reply_error(message, "unknown exception");
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": serve handler threw a non-standard exception");
    }
    return returned;
  }
  // Without acks, a message is done when its handler returns, however it returns.
  struct Settle {
    SubscriptionCells& cells;
    bool settles;
    ~Settle() {
      if (settles) bump(cells.settled);
    }
  } settle{*cells_, !caps.ack};
  std::string failure;
  try {
    joined_batch_ = false;
    handler_(message);
    handler_returned();
    if (batching && joined_batch_) {
      settle.settles = false;  // by its batch
      return returned;
    }
    if (caps.ack && !detail::state_of(message)->manual.load() && !message.responded())
      message.ack();
    return returned;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "a non-standard exception";
  }
  handler_returned();
  shared_->emit_error(make_error_code(errc::handler_failed),
                      topic_ + ": handler threw: " + failure);
  if (detail::state_of(message)->manual.load() || message.responded()) return returned;
  if (!handle_failure(message, failure)) settle.settles = false;
  return returned;
}

// ---- subscribe_batch ----

void SubscriptionCore::release(Message& message) {
  // Not handled: give it back at once so another subscriber can have it.
  if (message.expects_reply()) {
    detail_reply_error(message, "responder unsubscribed");
  } else if (shared_->caps.ack && !message.responded()) {
    message.nack(std::chrono::milliseconds(0));
  } else if (!shared_->caps.ack) {
    bump(cells_->settled);
  }
}

metrics::SubscriptionMetrics SubscriptionCore::metrics() const {
  metrics::SubscriptionMetrics m;
  m.topic = topic_;
  m.group = group_;
  m.serving = serving_;
  m.received = cells_->received.load(std::memory_order_relaxed);
  m.acked = cells_->acked.load(std::memory_order_relaxed);
  m.nacked = cells_->nacked.load(std::memory_order_relaxed);
  m.replied = cells_->replied.load(std::memory_order_relaxed);
  m.discarded = cells_->discarded.load(std::memory_order_relaxed);
  m.dead_lettered = cells_->dead_lettered.load(std::memory_order_relaxed);
  m.delivered_raw = cells_->delivered_raw.load(std::memory_order_relaxed);
  const std::uint64_t answered =
      m.acked + m.nacked + m.replied + cells_->settled.load(std::memory_order_relaxed);
  m.in_flight = m.received > answered ? m.received - answered : 0;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    m.held_messages = held_messages() + retries_waiting_.load();
    m.held_bytes = held_bytes_ + retry_bytes_;
  }
  m.handler_time = cells_->handler_time.snapshot();
  const auto read = [](const std::atomic<std::uint64_t>& cell) {
    return cell.load(std::memory_order_relaxed);
  };
  m.batches = read(cells_->batches);
  m.batched_messages = read(cells_->batched_messages);
  m.handler_timeouts = read(cells_->handler_timeouts);
  m.handler_late_returns = read(cells_->handler_late_returns);
  m.throttled_messages = read(cells_->throttled_messages);
  m.circuit_opened = read(cells_->circuit_opened);
  m.circuit_rejected_messages = read(cells_->circuit_rejected_messages);
  m.deduplicated_messages = read(cells_->deduplicated_messages);
  return m;
}

std::size_t SubscriptionCore::pending() const {
  std::lock_guard<BriefMutex> lock(mutex_);
  return queue_.size() + taken_waiting_.load() + running_ + retries_waiting_.load() +
         batch_held_.load();
}

bool SubscriptionCore::idle() const {
  std::lock_guard<BriefMutex> lock(mutex_);
  return queue_.empty() && running_ == 0 && retries_waiting_.load() == 0 &&
         batch_held_.load() == 0 && batch_running_.load() == 0;
}

}  // namespace polybus::detail
