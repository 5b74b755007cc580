// SPDX-License-Identifier: Apache-2.0
// Internal: the part of the client that every adapter shares: threads, deadlines, capability
// checks, statistics, handler dispatch and the close sequence.
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_set>

#include "cancellation_state.hpp"
#include "client_shared.hpp"
#include "handler_pool.hpp"
#include "operations.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/client.hpp"
#include "runtime.hpp"
#include "topic_names.hpp"

namespace polybus::detail {

class ClientCore;
class TopicRequests;

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
  Clock::time_point handle(Message& message);  // when the handler returned
  void release(Message& message);              // give back a message that will not be handled
  // Strand: pause the adapter's side while the user paused or too much waits for handlers.
  void apply_flow();
  // Strand: while the application pauses, has what is held touched now and then at the
  // adapter's pace (held_touch_interval), so a long pause does not make the broker send it again.
  void touch_held();
  void stop_touching();                // strand
  void taken(const Message& message);  // a handler took a message off the queue
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
  std::atomic<std::size_t> batch_held_{0};           // batch_.size(), read by idle() and pending()
  std::atomic<std::size_t> batch_running_{0};        // batches handed to a thread and not yet done
  std::unique_ptr<asio::steady_timer> batch_timer_;  // strand
  const bool on_io_thread_;  // handlers run on the strand, one at a time (handler_thread=io)
  // The hop onto the strand that wakes a handler: one is pending per idle handler slot.
  HandlerMemory wake_memory_;
  std::uint32_t concurrency_;
  std::uint32_t max_attempts_;
  DiscardCallback on_discard_;
  DeadLetter dead_letter_;
  std::atomic<bool> active_{true};

  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::function<void(const Status&, bool ended)> on_settled_;  // strand
  std::function<void()> on_closing_;                           // strand
  std::optional<Status> ready_result_;
  // Strand: the asynchronous wait_ready()s not yet answered, each with its deadline's timer.
  struct ReadyWaiter {
    Completion done;
    asio::steady_timer timer;
    explicit ReadyWaiter(const Strand& strand) : timer(strand) {}
  };
  std::vector<std::shared_ptr<ReadyWaiter>> ready_waiters_;
  std::string not_ready_within(std::chrono::milliseconds timeout) const;
  Fifo<Message> queue_;
  std::uint32_t running_ = 0;
  bool drop_when_idle_ = false;  // guarded by mutex_: drop_handlers_when_idle() waits for running_
  // Budget: what waits in queue_ for a handler. Over either bound the adapter is paused (RDY 0,
  // DETACH, ...) until half of it has drained: back-pressure, never an unbounded queue.
  std::size_t max_held_messages_;
  std::size_t max_held_bytes_;
  std::size_t held_bytes_ = 0;
  bool over_budget_ = false;  // guarded by mutex_
  bool pull_full_ = false;    // guarded by mutex_: a PullSubscription's inbox is full
  // pause(): queue_ keeps what arrives until resume(); guarded by mutex_. Set at once, not on
  // the strand: what the broker had sent before it heard of the pause is held too.
  bool delivery_paused_ = false;
  bool cooling_ = false;              // guarded by mutex_: cool_down() holds messages back
  std::uint64_t cooling_arming_ = 0;  // strand: which cool_down the timer below ends
  bool cooling_strand_ = false;       // strand: the adapter is paused for cool_down()
  std::unique_ptr<asio::steady_timer> cooling_timer_;  // strand
  // Strand only:
  bool user_paused_ = false;
  bool adapter_paused_ = false;
  bool adapter_held_ = false;

  std::shared_ptr<AdapterSubscription> adapter_;  // strand

  std::unique_ptr<asio::steady_timer> touch_timer_;  // strand: touch_held's next, while armed
  std::uint64_t touch_arming_ = 0;  // strand: which arming a wait belongs to (resets count too)
  // Strand: messages waiting for their in-place retry. A close waits for them (within its
  // deadline); whatever is still waiting when the subscription ends is reported, not dropped
  // silently.
  struct Retry {
    asio::steady_timer timer;
    Message message;
    bool dead_letter;
    std::string reason;
  };
  std::list<Retry> retries_;
  void retry_now(std::list<Retry>::iterator due);
  std::atomic<std::size_t> retries_waiting_{0};
  std::size_t retry_bytes_ = 0;  // guarded by mutex_: payload bytes of the messages in retries_
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(const SchemeInfo& scheme, Url url, ResolvedOptions options, ConnectOptions connect,
             Strand strand);
  void start(const SchemeInfo& scheme);

  const std::string& scheme() const { return shared_->scheme; }
  const Capabilities& capabilities() const { return shared_->caps; }
  const std::shared_ptr<ClientShared>& shared() const { return shared_; }
  const std::shared_ptr<HandlerPool>& pool() const { return pool_; }
  bool handlers_on_io_thread() const { return handlers_on_io_thread_; }
  bool on_strand() const { return shared_->strand.running_in_this_thread(); }

  void publish(std::string_view topic, Payloads payloads, Completion done, PublishOptions options,
               bool batch);
  // One of handler, serve and batch is set (batch_options with batch).
  Subscription subscribe(std::string_view topic, SubscribeOptions options, MessageHandler handler,
                         ServeHandler serve, BatchHandler batch = nullptr,
                         BatchOptions batch_options = {});
  std::shared_ptr<SubscriptionCore> open_subscription(std::string_view topic,
                                                      SubscribeOptions options,
                                                      MessageHandler handler, ServeHandler serve,
                                                      BatchHandler batch = nullptr,
                                                      BatchOptions batch_options = {});
  // Request/reply over topics (topic_requests.hpp); null where the protocol has its own, or
  // without the envelope.
  const std::shared_ptr<TopicRequests>& topic_requests() const { return topic_requests_; }
  // Strand: a request over topics goes out as a publish; `failed` hears of its failure.
  void publish_request(TopicName topic, Payloads payloads, Clock::time_point deadline,
                       std::function<void(std::error_code, const std::string&)> failed);
  // Strand: a payload in its envelope already (a reply over topics), published as it is.
  void publish_enveloped(std::string_view topic, std::string payload, Completion done);
  void request(std::string_view topic, std::string payload, ReplyCompletion done,
               RequestOptions options);
  void ping(Completion done, std::chrono::milliseconds timeout);
  void flush(std::chrono::milliseconds timeout, Completion done);
  void close(std::chrono::milliseconds timeout, Completion done);
  bool closed() const { return state_.load() == State::closed; }
  // Closing or closed: only then does a subscription falling idle matter to check_drain().
  bool closing() const { return state_.load() != State::open; }

  // Strand: a subscription or an operation finished; see whether close can go on.
  void check_drain();
  void unsubscribe(const std::shared_ptr<SubscriptionCore>& sub,
                   std::function<void(const Status&)> done);

  // Posts fn to the strand after every publish and request taken in so far and before any taken
  // in later: the order the calling thread made them in. Without this, a publish or request made
  // after fn was posted could join a drain queued before it and run first.
  template <typename Fn>
  void post_in_order(Fn&& fn) {
    std::lock_guard<std::mutex> lock(intake_mutex_);
    if (!intake_.empty()) {  // its drain is queued already: it takes this batch
      sealed_.push_back(std::move(intake_));
      intake_.clear();
    }
    asio::post(shared_->strand, std::forward<Fn>(fn));
  }

  metrics::ClientMetrics metrics() const;

 private:
  enum class State { open, closing, closed };
  // timeout from now (one clock read per operation, shared with its issue time), or op_timeout.
  Clock::time_point deadline_from(std::chrono::milliseconds timeout, Clock::time_point now) const;
  // deadline_passed: the close timer fired before everything drained.
  void finish_close(bool deadline_passed);
  Status what_the_close_deadline_cut_off() const;
  void fail_now(Completion done, Status status);
  // Takes a publish's or request's bytes from max_outgoing_bytes; the refusal when over it.
  Status take_outgoing(std::string_view what, std::string_view topic, std::size_t bytes);
  // Publishes and requests from any thread wait here for the strand. Only the first into an
  // empty intake posts to the strand (under the lock): a burst costs one post (and at most one
  // wake of the io thread), not one each. Order is kept, publishes and requests together: a
  // later post from any thread that saw its work go in (a close, say) runs after the drain
  // that work relies on.
  struct IntakeWork {
    TopicName topic;
    Payloads payloads;      // a request's one payload is the first
    std::size_t bytes = 0;  // the payloads', taken from max_outgoing_bytes until completed
    Completion done;        // a publish's
    ReplyCompletion reply;  // a request's
    bool request = false;
    std::uint64_t correlation = 0;  // a request's over topics (TopicRequests)
    bool answers_request = false;   // a reply over topics: it goes while a close drains
    std::chrono::milliseconds defer{0};
    std::uint64_t flush_epoch = 0;  // a publish's, counted in shared_->flush_epochs
    Clock::time_point deadline;
    Clock::time_point issued;
    const Operation* made = nullptr;  // its operation, once made: completed at once if the
                                      // adapter throws instead of at its deadline
    std::shared_ptr<CancellationState> cancel;  // a request's RequestOptions::cancellation
  };
  // A request's link to its Cancellation (strand): `finished` once its operation completed.
  struct CancelHook {
    std::shared_ptr<CancellationState> state;
    const Operation* made = nullptr;
    std::uint64_t id = 0;
    bool finished = false;
    void finish() {
      finished = true;
      if (id) forget_cancel(*state, id);
    }
  };
  // Strand: a request whose Cancellation was cancelled before it started: completed unsent.
  bool cancelled_before_start(IntakeWork& work);
  // Strand: from here `hook`'s Cancellation completes the operation it names.
  void arm_cancellation(const std::shared_ptr<CancelHook>& hook, std::string_view topic);
  void take_in(IntakeWork&& work, std::string_view topic);  // names work.topic
  // Strand: hands everything taken in since the last call to the adapter, in order.
  void drain_intake();
  void start_publish(IntakeWork& work);              // strand
  void start_request(IntakeWork& work);              // strand
  void start_request_over_topics(IntakeWork& work);  // strand
  // start(): request/reply over topics where the protocol has none and the envelope is on.
  void set_up_requests_over_topics();
  // Strand: an adapter threw while taking `work`: logged, and its operation completed now.
  void adapter_failed(IntakeWork& work, std::error_code ec, const std::string& why);
  TopicNames topic_names_;      // each publish's and request's topic, shared, not copied
  TopicName last_intake_name_;  // under intake_mutex_: the last topic taken in
  std::mutex intake_mutex_;
  std::vector<IntakeWork> intake_;  // guarded by intake_mutex_
  // Batches closed by post_in_order(), oldest first, each with its drain queued; guarded by
  // intake_mutex_.
  std::deque<std::vector<IntakeWork>> sealed_;
  std::vector<IntakeWork> intake_spare_;  // guarded by intake_mutex_: an empty one, reused
  // The intake's drain, posted from a publishing thread (no asio cache of its own): one at a time.
  HandlerMemory drain_memory_;

  std::shared_ptr<ClientShared> shared_;
  Url url_;
  ResolvedOptions options_;
  std::shared_ptr<HandlerPool> pool_;
  std::chrono::milliseconds op_timeout_;
  std::uint32_t default_max_in_flight_;
  std::uint32_t default_concurrency_;
  bool handlers_on_io_thread_;  // handler_thread=io
  std::uint32_t default_max_attempts_;
  // Set by start(), read-only after: request/reply over topics, or why there is none.
  std::shared_ptr<TopicRequests> topic_requests_;
  std::string no_request_reply_;

  std::atomic<State> state_{State::open};
  // The subscriptions a metrics snapshot reports (any thread; pruned as they go).
  mutable std::mutex metric_subscriptions_mutex_;
  mutable std::vector<std::weak_ptr<SubscriptionCore>> metric_subscriptions_;
  // The last figures of subscriptions that ended (unsubscribed, or cut by the close), so that
  // metrics read after close_sync still have the consumer side; one per (topic, group, serving),
  // the latest, at most kRetiredSubscriptions. Guarded by metric_subscriptions_mutex_.
  static constexpr std::size_t kRetiredSubscriptions = 1024;
  std::map<std::tuple<std::string, std::string, bool>, metrics::SubscriptionMetrics> retired_;
  // Strand: keeps `sub`'s figures as they are now, for metrics() after it ended.
  void retire_metrics(const SubscriptionCore& sub);
  // Pruned once it doubled since the last pruning: a subscribe costs O(1), not O(subscriptions).
  std::size_t metric_subscriptions_pruned_at_ = 0;
  // Strand only:
  std::unique_ptr<Adapter> adapter_;
  std::shared_ptr<OperationTracker> ops_;
  // Unordered: every pass over them (pause, drain, close) is order-free, and an unsubscribe of
  // one of 10,000 must not search them all.
  std::unordered_set<std::shared_ptr<SubscriptionCore>> subscriptions_;
  std::vector<Completion> close_waiters_;
  Clock::time_point close_deadline_;
  // Strand: the publish metrics of the last topic published to, and its name (start_publish).
  std::shared_ptr<const std::string> last_cells_name_;
  TopicCells* last_cells_ = nullptr;
  std::chrono::milliseconds close_timeout_{0};
  std::unique_ptr<asio::steady_timer> close_timer_;
  bool adapter_closing_ = false;
};

// What a Client owns: closing, and joining the io thread, when it goes. ClientRefs reach it
// through weak references only, so it goes with its Client (or with the last call in progress
// through a ClientRef, on that call's thread).
class ClientHandle {
 public:
  ClientHandle(std::shared_ptr<ClientCore> core, std::shared_ptr<Runtime> runtime,
               std::chrono::milliseconds close_timeout)
      : core(std::move(core)), runtime(std::move(runtime)), close_timeout(close_timeout) {}
  // Off the client's threads: closes, waiting for the drain up to close_timeout. On a thread of
  // its io_context or one of its handler threads, which the drain needs (or waits for): starts
  // the close and returns, and the close goes on in the background.
  ~ClientHandle();
  // This thread runs the client's io_context (its own io thread, or any thread of the
  // application's): a wait here could be a wait for this very thread.
  bool on_io_context() const { return core->shared()->on_io_context(); }
  // This thread is one of the client's handler threads.
  bool on_handler_thread() const { return core->pool()->on_own_thread(); }
  std::shared_ptr<ClientCore> core;
  std::shared_ptr<Runtime> runtime;
  std::chrono::milliseconds close_timeout;
};

}  // namespace polybus::detail
