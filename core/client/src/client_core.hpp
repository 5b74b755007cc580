// SPDX-License-Identifier: Apache-2.0
// Internal: the part of the client that every adapter shares: threads, deadlines, capability
// checks, statistics and the close sequence (client_core.cpp, client_intake.cpp,
// client_subscribe.cpp, client_requests.cpp, client_close.cpp).
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

#include "brief_mutex.hpp"
#include "cancellation_state.hpp"
#include "client_shared.hpp"
#include "handler_pool.hpp"
#include "operations.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/client.hpp"
#include "runtime.hpp"
#include "subscription_core.hpp"
#include "topic_names.hpp"

namespace polybus::detail {

// What an adapter's exception completes its operation with: its own code where it has one.
std::error_code adapter_error_code(const std::exception& e);

class TopicRequests;

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
    std::lock_guard<BriefMutex> lock(intake_mutex_);
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
  // Strand: a close asked for while one is under way, with `timeout`.
  void bring_close_forward(std::chrono::milliseconds timeout);
  void fail_now(Completion done, Status status);
  // Takes a publish's or request's bytes from max_outgoing_bytes; the refusal when over it.
  Status take_outgoing(std::string_view what, std::string_view topic, std::size_t bytes);
  // Why a publish is not taken, or nothing: then its payloads are wrapped in the envelope and
  // their bytes (`bytes`, as wrapped) taken from max_outgoing_bytes.
  Status publish_refusal(std::string_view topic, Payloads& payloads, PublishOptions& options,
                         bool batch, std::size_t& bytes);
  // Publishes and requests from any thread wait here for the strand. Only the first into an
  // empty intake posts to the strand (under the lock): a burst costs one post (and at most one
  // wake of the io thread), not one each. Order is kept, publishes and requests together: a
  // later post from any thread that saw its work go in (a close, say) runs after the drain
  // that work relies on.
  struct IntakeWork {
    TopicName topic;
    bool same_topic = false;  // unnamed: the topic of the work before it (take_in)
    Payloads payloads;        // a request's one payload is the first
    std::size_t bytes = 0;    // the payloads', taken from max_outgoing_bytes until completed
    Completion done;          // a publish's
    ReplyCompletion reply;    // a request's
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
  BriefMutex intake_mutex_;
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
