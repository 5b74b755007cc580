// SPDX-License-Identifier: Apache-2.0
// Internal: one subscription or serve() registration, the dispatcher between an adapter's
// deliveries and the handler pool. Its ideas, a file each: dispatch and the handler call
// (subscription_core.cpp), flow control, pauses and touches (subscription_flow.cpp), retries
// and dead letters (subscription_retries.cpp), batches (subscription_batch.cpp), and readiness
// and the end (subscription_lifecycle.cpp).
#pragma once

#include <condition_variable>
#include <list>
#include <mutex>

#include "brief_mutex.hpp"
#include "client_shared.hpp"
#include "handler_pool.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/client.hpp"

namespace polybus::detail {

class ClientCore;

// One subscription or serve() registration: the sink the adapter delivers into, and the
// dispatcher that runs handlers on the pool with bounded concurrency.
class SubscriptionCore : public SubscriptionSink,
                         public std::enable_shared_from_this<SubscriptionCore> {
 public:
  // What a subscription runs: one of handler, serve and batch, and the middleware around it.
  struct Handlers {
    MessageHandler handler;
    ServeHandler serve;
    BatchHandler batch;
    BatchOptions batch_options;
    std::vector<Middleware> middleware;
  };
  SubscriptionCore(std::shared_ptr<ClientCore> client, std::string topic, std::string group,
                   Handlers handlers, std::uint32_t concurrency, std::uint32_t max_in_flight,
                   std::uint32_t max_attempts, DiscardCallback on_discard, DeadLetter dead_letter,
                   const Budget& budget);

  // SubscriptionSink (strand)
  void deliver(Message message) override;
  void ready(std::error_code ec, const std::string& detail) override;
  void ended(std::error_code ec, const std::string& detail) override;

  Status wait_ready(std::chrono::milliseconds timeout);
  // Any thread: `done` runs on the strand once the broker confirmed or refused the subscription,
  // or with errc::timeout at the deadline.
  void wait_ready(std::chrono::milliseconds timeout, Completion done);
  // Strand: fn hears the broker's confirmation or refusal (ended false), then the end of the
  // subscription on the broker's side (ended true). Set before the adapter knows of it.
  void on_settled(std::function<void(const Status&, bool ended)> fn) {
    on_settled_ = std::move(fn);
  }
  // Strand: the subscription is over (ended by the broker or the close, or unsubscribed): tells
  // on_settled, once.
  void settle_end(const Status& why);
  // Strand: fn hears that the client began to close (a PullSubscription gives back what waits
  // in its inbox, so that a close does not wait for messages nobody will take).
  void on_closing(std::function<void()> fn) { on_closing_ = std::move(fn); }
  void closing() {
    if (auto fn = std::move(on_closing_)) {
      on_closing_ = nullptr;
      fn();
    }
  }
  void unsubscribe(std::function<void(const Status&)> done);
  void pause();
  void resume();
  void set_max_in_flight(std::uint32_t n);
  bool active() const { return active_.load(); }
  // The broker's confirmation or refusal (or the end that came first); empty until then.
  std::optional<Status> ready_result() const {
    std::lock_guard<BriefMutex> lock(mutex_);
    return ready_result_;
  }
  std::size_t pending() const;
  bool idle() const;  // no message queued or being handled
  const std::string& topic() const { return topic_; }
  std::uint32_t max_in_flight() const { return max_in_flight_.load(); }
  // Any thread: a PullSubscription's inbox holds max_in_flight untaken (or no longer): the
  // broker is held back as the budget holds it (apply_flow).
  void hold_for_pull(bool full);
  bool acks() const { return shared_->caps.ack; }
  const Strand& strand() const { return shared_->strand; }
  metrics::SubscriptionMetrics metrics() const;

  // Strand: the adapter's side of this subscription.
  void attach(std::shared_ptr<AdapterSubscription> adapter) { adapter_ = std::move(adapter); }
  const std::shared_ptr<AdapterSubscription>& adapter() const { return adapter_; }
  void deactivate();     // stop handing messages to the handler; release queued ones
  void drain_held();     // resumed or closing: what a pause held goes to the handler
  void drop_handlers();  // after close: break reference cycles through user lambdas
  // After an unsubscribe: the handlers (and the middleware around them) let go now, or as the
  // last running one returns, so that a handler that captured its own Subscription makes no
  // cycle that keeps this, and the handler threads, alive.
  void drop_handlers_when_idle();
  bool on_strand() const { return shared_->strand.running_in_this_thread(); }
  bool on_io_context() const { return shared_->on_io_context(); }
  // circuit_breaker: no message reaches the handler for `length`, and the adapter is paused
  // meanwhile (as pause() does, apart from the application's own pause). Any thread.
  void cool_down(std::chrono::milliseconds length);
  // The subscription whose handler runs on this thread now (for the ready middleware), or null.
  static SubscriptionCore* current();

 private:
  // With mutex_ held: no message goes to a handler now.
  bool held_back() const { return delivery_paused_ || cooling_; }
  // Failed handler (or batch handler) of `message`: nacked, retried in place, dead-lettered or
  // discarded as max_attempts says. False when that settled it (no in_flight count left to do).
  bool handle_failure(Message& message, const std::string& failure);
  // subscribe_batch: `message` joins the batch being filled (the chain's last step); a full one
  // is handed to the batch handler on this thread.
  void join_batch(Message& message);
  bool credit_used_up() const;               // the broker sends no more until something is answered
  void batch_due(std::uint64_t generation);  // strand: max_wait passed for that batch
  void hand_over_batch_if_closing();         // what a close finds in the batch, at once
  void run_batch_elsewhere(std::vector<Message> messages);  // on a handler thread (or strand)
  void run_batch(std::vector<Message> messages);
  void run_queue();
  void start_handlers();  // wake handler threads for what queue_ holds, up to concurrency_
  void post_run_queue();  // to a handler thread, or the strand (handler_thread=io)
  // When the handler returned. `started`: when the one before it returned, in the same turn
  // (min(): no handler ran before it), so that a stream of messages costs one clock read each.
  Clock::time_point handle(Message& message, Clock::time_point started);
  void release(Message& message);  // give back a message that will not be handled
  // Strand: pause the adapter's side while the user paused or too much waits for handlers.
  void apply_flow();
  // Strand: while the application pauses, has what is held touched now and then at the
  // adapter's pace (held_touch_interval), so a long pause does not make the broker send it again.
  void touch_held();
  void stop_touching();  // strand
  // With mutex_ held. A handler took a message off the queue to run it now.
  void taken(const Message& message);
  // ... and `count` more with it, run next without the lock (counted in taken_waiting_): still
  // held for the budget, and touched while a pause holds them.
  void taken_ahead(const Message* first, std::size_t count);
  // ... and, back under the lock, the rest of those are put back, unhandled, at the front,
  // and the `handled_bytes` of those it ran leave the budget.
  void give_back_taken(Message message);
  void settle_taken_ahead(std::size_t handled_bytes);
  // With mutex_ held: what says the budget is now over (empty: it is not, or already was), and
  // the release once half has drained.
  std::string check_over_budget();
  void check_under_half();
  void enqueue(Message message);  // into the queue for a handler; starts one if idle
  // Envelope: the payload and headers inside (any thread, before the handler sees it).
  void open_envelope(Message& message);
  // Over max_attempts: to the dead-letter topic (then acked), else to on_discard (then acked).
  void give_up(Message message, std::string reason);
  void send_to_dead_letter(Message message, std::string reason);
  // Where the broker cannot redeliver: try again here after the requeue backoff, the handler
  // (dead_letter false) or the dead-letter publish (true). Any thread.
  void retry_in_place(Message message, bool dead_letter, std::string reason);
  std::chrono::milliseconds backoff_for(std::uint32_t attempts) const;
  std::chrono::milliseconds dead_letter_backoff(std::uint32_t attempts) const;  // at least 100 ms

  std::weak_ptr<ClientCore> client_;
  std::shared_ptr<ClientShared> shared_;
  std::shared_ptr<HandlerPool> pool_;
  std::string topic_;
  std::string group_;
  bool serving_;
  // A serve over topics (TopicRequests): each message is a request whose reply the client sends.
  std::weak_ptr<MessageBackend> reply_route_;
  bool routes_replies_ = false;
  // Counted by messages too (MessageState::subscription_cells), which may outlive this.
  std::shared_ptr<SubscriptionCells> cells_;
  MessageHandler handler_;
  ServeHandler serve_handler_;
  BatchHandler batch_handler_;
  BatchOptions batch_options_;
  std::atomic<std::uint32_t> max_in_flight_;
  // subscribe_batch: the batch being filled, guarded by batch_mutex_ (taken before mutex_,
  // never the other way); the generation tells a due timer whether its batch is still there.
  std::mutex batch_mutex_;
  std::vector<Message> batch_;
  std::uint64_t batch_generation_ = 0;
  std::atomic<std::size_t> batch_held_{0};     // batch_.size(), read by idle() and pending()
  std::atomic<std::size_t> batch_running_{0};  // batches handed to a thread and not yet done
  std::unique_ptr<ClockTimer> batch_timer_;    // strand
  const bool on_io_thread_;  // handlers run on the strand, one at a time (handler_thread=io)
  // The hop onto the strand that wakes a handler: one is pending per idle handler slot.
  HandlerMemory wake_memory_;
  std::uint32_t concurrency_;
  std::uint32_t max_attempts_;
  DiscardCallback on_discard_;
  DeadLetter dead_letter_;
  std::atomic<bool> active_{true};

  mutable BriefMutex mutex_;
  std::condition_variable_any ready_cv_;                       // rare: wait_ready()
  std::function<void(const Status&, bool ended)> on_settled_;  // strand
  std::function<void()> on_closing_;                           // strand
  std::optional<Status> ready_result_;
  // Strand: the asynchronous wait_ready()s not yet answered, each with its deadline's timer.
  struct ReadyWaiter {
    Completion done;
    ClockTimer timer;
    ReadyWaiter(const Strand& strand, std::shared_ptr<ManualClock> clock)
        : timer(strand, std::move(clock)) {}
  };
  std::vector<std::shared_ptr<ReadyWaiter>> ready_waiters_;
  std::string not_ready_within(std::chrono::milliseconds timeout) const;
  Fifo<Message> queue_;
  // Taken off the queue together with the one a handler thread runs, and not yet handled
  // (run_queue): still waiting for a handler, as pending(), held_messages and the budget count
  // them.
  std::atomic<std::size_t> taken_waiting_{0};
  std::uint32_t running_ = 0;
  // Guarded by mutex_: the handlers are to go once none runs (take_handlers_if_idle).
  bool drop_when_idle_ = false;
  struct DroppedHandlers {  // destroyed outside the lock that took them
    MessageHandler handler;
    ServeHandler serve;
    BatchHandler batch;
  };
  // With mutex_ held: moves the handlers into `into` if they are to go and none runs.
  void take_handlers_if_idle(DroppedHandlers& into);
  // Budget: what waits in queue_ for a handler, and what a handler thread took ahead. Over
  // either bound the adapter is paused (RDY 0, DETACH, ...) until half of it has drained:
  // back-pressure, never an unbounded queue. Guarded by mutex_.
  std::size_t max_held_messages_;
  std::size_t max_held_bytes_;
  std::size_t held_bytes_ = 0;
  // Where the adapter touches what is held: copies of those taken ahead for touch_held(), and
  // how many of them the handler thread has run so far (written without the lock). Settled
  // copies move to ahead_spent_, which the one running handler thread empties outside the lock:
  // a message's last reference may be among them.
  std::vector<Message> ahead_copies_;
  std::vector<Message> ahead_spent_;
  std::atomic<std::size_t> ahead_handed_{0};
  std::size_t held_messages() const { return queue_.size() + taken_waiting_.load(); }
  bool over_budget_ = false;  // guarded by mutex_
  bool pull_full_ = false;    // guarded by mutex_: a PullSubscription's inbox is full
  // pause(): queue_ keeps what arrives until resume(); guarded by mutex_. Set at once, not on
  // the strand: what the broker had sent before it heard of the pause is held too.
  // Both written under mutex_; read without it by a handler thread between the messages it took
  // together (run_queue).
  std::atomic<bool> delivery_paused_{false};
  std::atomic<bool> cooling_{false};           // cool_down() holds messages back
  std::uint64_t cooling_arming_ = 0;           // strand: which cool_down the timer below ends
  bool cooling_strand_ = false;                // strand: the adapter is paused for cool_down()
  std::unique_ptr<ClockTimer> cooling_timer_;  // strand
  // Strand only:
  bool user_paused_ = false;
  bool adapter_paused_ = false;
  bool adapter_held_ = false;

  std::shared_ptr<AdapterSubscription> adapter_;  // strand

  std::unique_ptr<ClockTimer> touch_timer_;  // strand: touch_held's next, while armed
  std::uint64_t touch_arming_ = 0;  // strand: which arming a wait belongs to (resets count too)
  // Strand: messages waiting for their in-place retry. A close waits for them (within its
  // deadline); whatever is still waiting when the subscription ends is reported, not dropped
  // silently.
  struct Retry {
    Retry(const Strand& strand, std::shared_ptr<ManualClock> clock, Message message,
          bool dead_letter, std::string reason)
        : timer(strand, std::move(clock)),
          message(std::move(message)),
          dead_letter(dead_letter),
          reason(std::move(reason)) {}
    ClockTimer timer;
    Message message;
    bool dead_letter;
    std::string reason;
  };
  std::list<Retry> retries_;
  void retry_now(std::list<Retry>::iterator due);
  std::atomic<std::size_t> retries_waiting_{0};
  std::size_t retry_bytes_ = 0;  // guarded by mutex_: payload bytes of the messages in retries_
  // Whether the message this handler thread runs joined a batch: set in join_batch, read in
  // handle(), both on the handler's own thread.
  static thread_local bool joined_batch_;
};

}  // namespace polybus::detail
