// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "middleware_chain.hpp"
#include "polybus/adapter/text.hpp"
#include "polybus/cloudevents.hpp"
#include "polybus/error.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

namespace {
// The subscription whose handler this thread runs (SubscriptionCore::current()), and whether the
// message it handles joined a batch: both set and read on the handler's own thread, in handle().
thread_local SubscriptionCore* running_subscription = nullptr;
thread_local bool joined_batch = false;

struct RunningSubscription {
  explicit RunningSubscription(SubscriptionCore* sub) : previous(running_subscription) {
    running_subscription = sub;
  }
  ~RunningSubscription() { running_subscription = previous; }
  SubscriptionCore* previous;
};
}  // namespace

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
    std::lock_guard<std::mutex> lock(mutex_);
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

std::string SubscriptionCore::check_over_budget() {
  // Called with mutex_ held.
  if (over_budget_ || (queue_.size() <= max_held_messages_ && held_bytes_ <= max_held_bytes_))
    return {};
  over_budget_ = true;
  return topic_ + ": " + std::to_string(queue_.size()) + " messages (" +
         std::to_string(held_bytes_) +
         " bytes) wait for handlers, over max_held_messages=" + std::to_string(max_held_messages_) +
         " or max_held_bytes=" + std::to_string(max_held_bytes_) +
         ": pausing delivery until half drain";
}

void SubscriptionCore::check_under_half() {
  // Called with mutex_ held.
  if (over_budget_ && queue_.size() <= max_held_messages_ / 2 &&
      held_bytes_ <= max_held_bytes_ / 2) {
    over_budget_ = false;
    asio::post(shared_->strand, [self = shared_from_this()] { self->apply_flow(); });
  }
}

void SubscriptionCore::apply_flow() {
  bool over;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    over = over_budget_ || pull_full_;
  }
  if (!adapter_) return;
  if (!adapter_->has_own_hold()) {
    // One pause serves both: the application's and the budget's.
    const bool want = user_paused_ || cooling_strand_ || over;
    if (want != adapter_paused_ && (want || active())) {
      adapter_paused_ = want;
      if (want)
        adapter_->pause();
      else
        adapter_->resume();
    }
    return;
  }
  if (over != adapter_held_ && (over || active())) {
    adapter_held_ = over;
    adapter_->hold(over);
  }
  const bool want = user_paused_ || cooling_strand_;
  if (want != adapter_paused_ && (want || active())) {
    adapter_paused_ = want;
    if (want)
      adapter_->pause();
    else
      adapter_->resume();
  }
}

void SubscriptionCore::hold_for_pull(bool full) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pull_full_ == full) return;
    pull_full_ = full;
  }
  asio::post(shared_->strand, [self = shared_from_this()] { self->apply_flow(); });
}

void SubscriptionCore::taken(const Message& message) {
  // Called with mutex_ held.
  held_bytes_ -= std::min(held_bytes_, message.payload().size());
  check_under_half();
}

void SubscriptionCore::run_queue() {
  // On the io thread a turn takes a bounded number, and a bounded time, so reads, timers, other
  // subscriptions and the writes its handlers made (their acks leave when the turn ends)
  // interleave with a long queue or slow handlers.
  constexpr std::uint32_t kMaxPerTurn = 64;
  constexpr auto kMaxTurn = std::chrono::milliseconds(1);
  Clock::time_point turn_ends = Clock::time_point::max(), returned = Clock::time_point::min();
  // Handlers an unsubscribe let go of while this one ran: destroyed after the lock is released.
  MessageHandler dropped_handler;
  ServeHandler dropped_serve;
  for (std::uint32_t handled = 0;; ++handled) {
    if (on_io_thread_ && (handled == kMaxPerTurn || returned > turn_ends))
      return post_run_queue();  // still running_
    Message message;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || (held_back() && active_.load())) {
        --running_;
        if (running_ == 0 && drop_when_idle_) {
          drop_when_idle_ = false;
          dropped_handler.swap(handler_);
          dropped_serve.swap(serve_handler_);
        }
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
    }
    if (!active_.load()) {
      release(message);
      continue;
    }
    returned = handle(message);
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

std::chrono::milliseconds SubscriptionCore::dead_letter_backoff(std::uint32_t attempts) const {
  // A dead-letter publish can fail at once (its client closed, say): with requeue_delay 0 the
  // next try would follow at once, for ever. A floor keeps it a retry, not a spin.
  constexpr std::chrono::milliseconds kFloor{100};
  return std::max(backoff_for(attempts), kFloor);
}

std::chrono::milliseconds SubscriptionCore::backoff_for(std::uint32_t attempts) const {
  return std::min(shared_->requeue_delay * std::max<std::uint32_t>(1, attempts),
                  shared_->max_requeue_delay);
}

void SubscriptionCore::give_up(Message message, std::string reason) {
  if (!dead_letter_.topic.empty())
    return send_to_dead_letter(std::move(message), std::move(reason));
  ++shared_->stats.discarded;
  bump(cells_->discarded);
  shared_->log(LogLevel::warn,
               topic_ + ": message " + message.id() + " discarded (" + reason + ")");
  if (on_discard_) {
    try {
      on_discard_(message);
    } catch (const std::exception& e) {
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": on_discard threw: " + e.what());
    } catch (...) {
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": on_discard threw a non-standard exception");
    }
  }
  if (shared_->caps.ack)
    message.ack();
  else
    bump(cells_->settled);
}

void SubscriptionCore::send_to_dead_letter(Message message, std::string reason) {
  // The headers go where an envelope carries them; the payload is the message's own either way.
  const bool elsewhere = !dead_letter_.client.empty();
  bool headers_travel = shared_->envelope.on();
  if (elsewhere) {
    try {
      headers_travel = dead_letter_.client.carries_headers();
    } catch (const Error&) {
      headers_travel = false;  // that client is gone: its publish below fails with closed
    }
  }
  PublishOptions options;
  if (headers_travel) {
    // What the envelope can carry: a foreign envelope may have names CloudEvents does not allow,
    // and one refused header would fail this publish on every try.
    for (const auto& [name, value] : message.headers())
      if (cloudevents::check_header_name(name).empty() && text::is_valid_utf8(value))
        options.headers.set(name, value);
    options.headers.set("deadletterreason",
                        text::is_valid_utf8(reason) ? reason : "(the reason is not UTF-8)");
    options.headers.set("deadletterattempts", std::to_string(message.attempts()));
    options.headers.set("deadlettertopic", topic_);
  }
  auto done = [self = shared_from_this(), message, reason](const Status& status) mutable {
    if (!status) {
      ++self->shared_->stats.dead_lettered;
      bump(self->cells_->dead_lettered);
      self->shared_->log(LogLevel::warn, self->topic_ + ": message " + message.id() +
                                             " sent to dead-letter topic " +
                                             self->dead_letter_.topic + " (" + reason + ")");
      if (self->shared_->caps.ack)
        message.ack();
      else
        bump(self->cells_->settled);
      return;
    }
    // Not acknowledged: nothing is lost. The broker gives it back, or it is tried again here.
    self->shared_->emit_error(status.code(),
                              self->topic_ + ": message " + message.id() +
                                  ": the publish to dead-letter topic " + self->dead_letter_.topic +
                                  " failed, so it stays unacknowledged: " + status.message());
    if (self->shared_->caps.ack)
      message.nack(self->dead_letter_backoff(message.attempts()));
    else
      self->retry_in_place(std::move(message), true, std::move(reason));
  };
  std::string payload(message.payload());
  if (elsewhere) {
    dead_letter_.client.publish(dead_letter_.topic, std::move(payload), std::move(options),
                                std::move(done));
  } else if (auto client = client_.lock()) {
    client->publish(dead_letter_.topic, Payloads(std::move(payload)), std::move(done),
                    std::move(options), false);
  } else {
    done(Status(errc::closed, "the client is gone"));
  }
}

void SubscriptionCore::retry_in_place(Message message, bool dead_letter, std::string reason) {
  // Messages waiting for a retry have a budget of their own, the same size as the handlers'
  // (max_held_*): counted with those, they would pause delivery for as long as the retries
  // wait, and on a connection that also carries publish confirmations (Figg) stall those.
  bool room;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t bytes = message.payload().size();
    room = retries_waiting_.load() < max_held_messages_ && retry_bytes_ + bytes <= max_held_bytes_;
    if (room) {
      ++retries_waiting_;
      retry_bytes_ += bytes;
    }
  }
  if (!room) {
    const std::string full =
        "no room to hold it for another try (" + std::to_string(retries_waiting_.load()) +
        " messages wait for theirs; max_held_messages=" + std::to_string(max_held_messages_) +
        ", max_held_bytes=" + std::to_string(max_held_bytes_) + ")";
    if (!dead_letter) return give_up(std::move(message), reason + "; " + full);
    // A dead letter that could not be sent and cannot be held: said, never dropped silently.
    shared_->emit_error(make_error_code(errc::limit_exceeded),
                        topic_ + ": message " + message.id() +
                            " dropped: its dead-letter publish "
                            "failed and there is " +
                            full);
    bump(cells_->settled);
    return;
  }
  asio::post(shared_->strand, [self = shared_from_this(), message = std::move(message), dead_letter,
                               reason = std::move(reason)]() mutable {
    const auto delay = dead_letter ? self->dead_letter_backoff(message.attempts())
                                   : self->backoff_for(message.attempts());
    self->retries_.push_back(Retry{asio::steady_timer(self->shared_->strand, delay),
                                   std::move(message), dead_letter, std::move(reason)});
    auto due = std::prev(self->retries_.end());
    due->timer.async_wait([self, due](std::error_code ec) {
      if (!ec) self->retry_now(due);  // else cancelled: deactivate() reported it
    });
  });
}

void SubscriptionCore::retry_now(std::list<Retry>::iterator due) {
  Message message = std::move(due->message);
  const bool dead_letter = due->dead_letter;
  std::string reason = std::move(due->reason);
  retries_.erase(due);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --retries_waiting_;
    retry_bytes_ -= std::min(retry_bytes_, message.payload().size());
  }
  if (!active_.load()) {
    shared_->emit_error(make_error_code(errc::closed),
                        topic_ + ": message " + message.id() +
                            " dropped before its retry: the subscription ended (" + reason + ")");
    bump(cells_->settled);
    return;
  }
  if (!dead_letter) return enqueue(std::move(message));
  pool_->post([self = shared_from_this(), message = std::move(message),
               reason = std::move(reason)] { self->send_to_dead_letter(message, reason); });
}

Clock::time_point SubscriptionCore::handle(Message& message) {
  open_envelope(message);
  const RunningSubscription running(this);
  const auto& caps = shared_->caps;
  const auto trace_scope = shared_->envelope.extract(message);
  const auto started = Clock::now();
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
    joined_batch = false;
    handler_(message);
    handler_returned();
    if (batching && joined_batch) {
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

bool SubscriptionCore::handle_failure(Message& message, const std::string& failure) {
  const bool last = max_attempts_ > 0 && message.attempts() >= max_attempts_;
  if (last && (!dead_letter_.topic.empty() || !shared_->caps.ack)) {
    // Its reason is known only now: give it up here rather than on a redelivery.
    give_up(message, "attempt " + std::to_string(message.attempts()) + " of " +
                         std::to_string(max_attempts_) + " failed: " + failure);
    return false;
  }
  if (shared_->caps.ack) {
    message.nack();
  } else if (max_attempts_ > 0) {
    // The broker cannot redeliver: the next attempt is made here.
    ++detail::state_of(message)->attempts;
    retry_in_place(message, false, failure);
    return false;
  }
  return true;
}

// ---- subscribe_batch ----

bool SubscriptionCore::credit_used_up() const {
  // Where answers give the broker its credit back (NSQ's RDY, mem's credit), every message the
  // subscription may have unanswered is in hand: nothing more comes until the batch is answered.
  if (!shared_->caps.ack) return false;
  const std::uint64_t received = cells_->received.load(std::memory_order_relaxed);
  const std::uint64_t answered = cells_->acked.load(std::memory_order_relaxed) +
                                 cells_->nacked.load(std::memory_order_relaxed) +
                                 cells_->settled.load(std::memory_order_relaxed);
  const std::uint64_t in_flight = received > answered ? received - answered : 0;
  if (in_flight < max_in_flight_.load()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty();  // what is queued joins this batch first
}

void SubscriptionCore::join_batch(Message& message) {
  joined_batch = true;
  std::vector<Message> full;
  std::uint64_t arm = 0;  // the generation of a batch this message began
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    batch_.push_back(message);
    batch_held_.store(batch_.size());
    if (batch_.size() == 1) arm = ++batch_generation_;
    auto client = client_.lock();
    const bool closing = !client || client->closing();
    if (batch_.size() >= batch_options_.max_messages || credit_used_up() || (closing && [&] {
          std::lock_guard<std::mutex> queue_lock(mutex_);
          return queue_.empty();
        }())) {
      full.swap(batch_);
      batch_held_.store(0);
      ++batch_generation_;  // its timer, if armed, finds another generation
      ++batch_running_;
      arm = 0;
    }
  }
  if (arm)
    asio::post(shared_->strand, [self = shared_from_this(), arm] {
      if (!self->batch_timer_)
        self->batch_timer_ = std::make_unique<asio::steady_timer>(self->shared_->strand);
      self->batch_timer_->expires_after(self->batch_options_.max_wait);
      self->batch_timer_->async_wait([weak = self->weak_from_this(), arm](std::error_code ec) {
        if (auto me = weak.lock(); me && !ec) me->batch_due(arm);
      });
    });
  if (!full.empty()) {
    run_batch(std::move(full));
    --batch_running_;
  }
}

void SubscriptionCore::batch_due(std::uint64_t generation) {
  std::vector<Message> due;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    if (generation != batch_generation_ || batch_.empty()) return;
    due.swap(batch_);
    batch_held_.store(0);
    ++batch_generation_;
    ++batch_running_;
  }
  run_batch_elsewhere(std::move(due));
}

void SubscriptionCore::hand_over_batch_if_closing() {
  if (!batch_handler_) return;
  std::uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    generation = batch_generation_;
  }
  asio::post(shared_->strand, [self = shared_from_this(), generation] {
    auto client = self->client_.lock();
    if (!client || client->closing()) self->batch_due(generation);
  });
}

void SubscriptionCore::run_batch_elsewhere(std::vector<Message> messages) {
  auto run = [self = shared_from_this(), messages = std::move(messages)]() mutable {
    self->run_batch(std::move(messages));
    if (--self->batch_running_ == 0 && !self->batch_held_.load()) {
      auto client = self->client_.lock();
      if (client && client->closing())
        asio::post(self->shared_->strand, [client] { client->check_drain(); });
    }
  };
  if (on_io_thread_)
    asio::post(shared_->strand, std::move(run));
  else
    pool_->post(std::move(run));
}

void SubscriptionCore::run_batch(std::vector<Message> messages) {
  bump(cells_->batches);
  bump(cells_->batched_messages, messages.size());
  Batch batch(std::move(messages));
  const auto started = Clock::now();
  bool failed = false;
  std::string failure;
  try {
    if (active_.load()) {
      batch_handler_(batch);
    } else {
      for (auto& message : batch) release(message);
      return;
    }
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "a non-standard exception";
  }
  cells_->handler_time.observe(Clock::now() - started);
  const bool ack = shared_->caps.ack;
  if (failed)
    shared_->emit_error(make_error_code(errc::handler_failed), topic_ + ": batch handler threw (" +
                                                                   std::to_string(batch.size()) +
                                                                   " messages): " + failure);
  for (auto& message : batch) {
    if (detail::state_of(message)->manual.load() || message.responded()) {
      if (!ack) bump(cells_->settled);
      continue;
    }
    if (!failed) {
      if (ack)
        message.ack();
      else
        bump(cells_->settled);
    } else if (handle_failure(message, failure) && !ack) {
      bump(cells_->settled);
    }
  }
}

void SubscriptionCore::cool_down(std::chrono::milliseconds length) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cooling_ = true;
  }
  asio::post(shared_->strand, [self = shared_from_this(), length] {
    self->cooling_strand_ = true;
    self->apply_flow();
    self->touch_held();
    self->cooling_timer_ = std::make_unique<asio::steady_timer>(self->shared_->strand, length);
    self->cooling_timer_->async_wait(
        [weak = self->weak_from_this(), arming = ++self->cooling_arming_](std::error_code ec) {
          auto me = weak.lock();
          if (ec || !me || me->cooling_arming_ != arming) return;
          {
            std::lock_guard<std::mutex> lock(me->mutex_);
            me->cooling_ = false;
          }
          me->cooling_strand_ = false;
          if (!me->user_paused_) me->stop_touching();
          me->apply_flow();
          me->start_handlers();
        });
  });
}

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

void SubscriptionCore::ready(std::error_code ec, const std::string& detail) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_result_) return;
    ready_result_ = Status(ec, detail);
  }
  ready_cv_.notify_all();
  for (auto& waiter : std::exchange(ready_waiters_, {})) {
    waiter->timer.cancel();
    shared_->complete("wait_ready", std::exchange(waiter->done, nullptr), Status(ec, detail));
  }
  if (on_settled_) on_settled_(Status(ec, detail), false);
  // Closing the client is the application's own doing, not an error to report.
  if (ec && ec != make_error_code(errc::closed))
    shared_->emit_error(ec, topic_ + ": subscription refused: " + detail);
}

void SubscriptionCore::ended(std::error_code ec, const std::string& detail) {
  deactivate();  // first: whoever wait_ready() wakes sees the subscription inactive
  ready(ec ? ec : make_error_code(errc::closed), detail);
  settle_end(Status(ec ? ec : make_error_code(errc::closed), detail));
  if (ec && ec != make_error_code(errc::closed))
    shared_->emit_error(ec, topic_ + ": subscription ended: " + detail);
}

void SubscriptionCore::settle_end(const Status& why) {
  if (auto settled = std::move(on_settled_)) {
    on_settled_ = nullptr;
    settled(why, true);
  }
}

Status SubscriptionCore::wait_ready(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (ready_result_) return *ready_result_;
  // Confirmed on the strand: waited for on a thread of its io_context, it could only time out.
  if (on_io_context())
    return Status(errc::would_block_io_thread,
                  topic_ +
                      ": wait_ready on a thread that runs the client's io_context (its io thread, "
                      "or a thread of the application's ConnectOptions::io_context) waits for "
                      "nothing: the confirmation needs that thread");
  if (ready_cv_.wait_for(lock, timeout, [&] { return ready_result_.has_value(); }))
    return *ready_result_;
  lock.unlock();
  return Status(errc::timeout, not_ready_within(timeout));
}

std::string SubscriptionCore::not_ready_within(std::chrono::milliseconds timeout) const {
  // With no connection up, why: the last connection's end ("connection refused", ...).
  const std::string what = topic_ + ": the subscription was not confirmed within " +
                           std::to_string(timeout.count()) + "ms";
  return shared_->connectivity.explain(what);
}

void SubscriptionCore::wait_ready(std::chrono::milliseconds timeout, Completion done) {
  asio::post(shared_->strand,
             [self = shared_from_this(), timeout, done = std::move(done)]() mutable {
               std::optional<Status> result;
               {
                 std::lock_guard<std::mutex> lock(self->mutex_);
                 result = self->ready_result_;
               }
               if (result) return self->shared_->complete("wait_ready", done, *result);
               auto waiter = std::make_shared<ReadyWaiter>(self->shared_->strand);
               waiter->done = std::move(done);
               waiter->timer.expires_after(timeout);
               self->ready_waiters_.push_back(waiter);
               // Holds the subscription for the deadline at most: ready() cancels it first.
               waiter->timer.async_wait([self, waiter, timeout](std::error_code) {
                 if (!waiter->done) return;  // ready() answered it
                 auto& waiters = self->ready_waiters_;
                 waiters.erase(std::remove(waiters.begin(), waiters.end(), waiter), waiters.end());
                 self->shared_->complete("wait_ready", std::exchange(waiter->done, nullptr),
                                         Status(errc::timeout, self->not_ready_within(timeout)));
               });
             });
}

void SubscriptionCore::deactivate() {
  active_.store(false);
  stop_touching();
  // Strand: what waits for an in-place retry will not get it.
  for (auto& retry : retries_) {
    shared_->emit_error(make_error_code(errc::closed),
                        topic_ + ": message " + retry.message.id() +
                            " dropped before its retry: the subscription ended (" + retry.reason +
                            ")");
    bump(cells_->settled);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retry_bytes_ = 0;
    retries_waiting_ -= retries_.size();
  }
  retries_.clear();  // cancels their timers
  Fifo<Message> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_ == 0) {
      left = std::move(queue_);  // otherwise the running loop releases them
      held_bytes_ = 0;
    }
  }
  for (auto& message : left) release(message);
  std::vector<Message> batch;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    batch.swap(batch_);
    batch_held_.store(0);
    ++batch_generation_;
  }
  for (auto& message : batch) release(message);
  if (batch_timer_) batch_timer_->cancel();
  if (cooling_timer_) cooling_timer_->cancel();
}

void SubscriptionCore::drop_handlers() {
  // Destroyed outside the lock: a handler's captures may hold the last Subscription handle of
  // this very subscription.
  MessageHandler handler;
  ServeHandler serve;
  BatchHandler batch;
  DiscardCallback discard;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_ == 0) {
      handler.swap(handler_);
      serve.swap(serve_handler_);
      if (batch_running_.load() == 0) batch.swap(batch_handler_);
      discard.swap(on_discard_);
    }
  }
}

void SubscriptionCore::drop_handlers_when_idle() {
  MessageHandler handler;
  ServeHandler serve;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_ > 0) {
      drop_when_idle_ = true;  // the last handler to return drops them (run_queue)
      return;
    }
    handler.swap(handler_);
    serve.swap(serve_handler_);
  }
}

void SubscriptionCore::unsubscribe(std::function<void(const Status&)> done) {
  active_.store(false);
  auto client = client_.lock();
  if (!client) {
    if (done) done(make_error_code(errc::closed));
    return;
  }
  client->post_in_order([client, self = shared_from_this(), done = std::move(done)]() mutable {
    client->unsubscribe(self, std::move(done));
  });
}

void SubscriptionCore::start_handlers() {
  std::uint32_t start = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_back() && active_.load()) return;
    start = static_cast<std::uint32_t>(
        std::min<std::size_t>(concurrency_ - std::min(concurrency_, running_), queue_.size()));
    running_ += start;
  }
  for (std::uint32_t i = 0; i < start; ++i) post_run_queue();
}

void SubscriptionCore::drain_held() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    delivery_paused_ = false;
    if (auto client = client_.lock(); !client || client->closing()) cooling_ = false;
  }
  start_handlers();
  hand_over_batch_if_closing();
}

void SubscriptionCore::pause() {
  // Closing: the client drains what is held (drain_held) and has paused the adapter itself.
  if (auto client = client_.lock(); client && client->closing()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    delivery_paused_ = true;
  }
  asio::post(shared_->strand, [self = shared_from_this()] {
    self->user_paused_ = true;
    self->apply_flow();
    self->touch_held();  // at once too: what waited behind a slow handler may be old already
  });
}

void SubscriptionCore::touch_held() {
  if (!(user_paused_ || cooling_strand_) || !active() || !adapter_ || !shared_->caps.touch) return;
  const auto interval = adapter_->held_touch_interval();
  if (interval.count() <= 0) return;
  std::vector<Message> held;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Resumed (or closing) already: handlers take these now, and ack them.
    if (!held_back()) return;
    held.assign(queue_.begin(), queue_.end());
  }
  held.erase(
      std::remove_if(held.begin(), held.end(), [](const Message& m) { return m.responded(); }),
      held.end());
  if (!held.empty()) adapter_->touch_held(held);
  // A wait that had fired before its timer was reset or replaced still runs, with success: the
  // arming it belongs to tells it apart.
  touch_timer_ = std::make_unique<asio::steady_timer>(shared_->strand, interval);
  touch_timer_->async_wait([weak = weak_from_this(), arming = ++touch_arming_](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->touch_arming_ != arming) return;  // cancelled or replaced
    self->touch_held();
  });
}

void SubscriptionCore::stop_touching() {
  ++touch_arming_;
  touch_timer_.reset();  // cancels it
}

void SubscriptionCore::resume() {
  drain_held();
  asio::post(shared_->strand, [self = shared_from_this()] {
    self->stop_touching();
    self->user_paused_ = false;
    self->apply_flow();
  });
}

void SubscriptionCore::set_max_in_flight(std::uint32_t n) {
  max_in_flight_.store(n);
  asio::post(shared_->strand, [self = shared_from_this(), n] {
    if (self->adapter_) self->adapter_->set_max_in_flight(n);
  });
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
    std::lock_guard<std::mutex> lock(mutex_);
    m.held_messages = queue_.size() + retries_waiting_.load();
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
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + running_ + retries_waiting_.load() + batch_held_.load();
}

bool SubscriptionCore::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && running_ == 0 && retries_waiting_.load() == 0 &&
         batch_held_.load() == 0 && batch_running_.load() == 0;
}

}  // namespace polybus::detail
