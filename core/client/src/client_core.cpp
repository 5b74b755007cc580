// SPDX-License-Identifier: Apache-2.0
// A client's core: what connect() builds (the shared state, the handler pool, the operation
// tracker, the adapter on its strand), ping, and the figures metrics() reads.
#include "client_core.hpp"

#include <algorithm>
#include <asio/post.hpp>

#include "polybus/error.hpp"
#include "stderr_log.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

namespace {
constexpr std::size_t kMaxHandlerThreads = 256;

}  // namespace

std::error_code adapter_error_code(const std::exception& e) {
  if (const auto* system = dynamic_cast<const std::system_error*>(&e)) return system->code();
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return std::make_error_code(std::errc::not_enough_memory);
  return make_error_code(errc::invalid_argument);  // a value the adapter could not take
}

ClientCore::ClientCore(const SchemeInfo& scheme, Url url, ResolvedOptions options,
                       ConnectOptions connect, Strand strand)
    : shared_(std::make_shared<ClientShared>(std::move(strand), scheme.scheme)),
      url_(std::move(url)),
      options_(std::move(options)),
      pool_(std::make_shared<HandlerPool>(kMaxHandlerThreads)),
      op_timeout_(options_.get_duration("op_timeout")),
      default_max_in_flight_(static_cast<std::uint32_t>(options_.get_int("max_in_flight"))),
      default_concurrency_(static_cast<std::uint32_t>(options_.get_int("handler_concurrency"))),
      handlers_on_io_thread_(options_.get_string("handler_thread") == "io"),
      default_max_attempts_(static_cast<std::uint32_t>(options_.get_int("max_attempts"))) {
  static std::atomic<std::uint64_t> clients_made{0};
  shared_->name = connect.name.empty() ? std::to_string(++clients_made) : std::move(connect.name);
  shared_->on_state = std::move(connect.on_state);
  shared_->on_error = std::move(connect.on_error);
  if (connect.log) {
    shared_->log_sink = std::move(connect.log);
    shared_->log_level = connect.log_level;
  } else {
    // Nothing fails in silence: without a sink of the application's, warnings and errors go to
    // stderr (an application that wants none sets a sink that drops them).
    shared_->log_sink = stderr_log(shared_->name);
    shared_->log_level = std::max(connect.log_level, LogLevel::warn);
  }
  shared_->custom_backoff = std::move(connect.reconnect_backoff);
  shared_->clock = std::move(connect.clock);
  shared_->connectivity.set_clock(shared_->clock);
  shared_->caps = scheme.capabilities;
  shared_->requeue_delay = options_.get_duration("requeue_delay");
  shared_->max_requeue_delay = options_.get_duration("max_requeue_delay");
  shared_->connectivity.set_connect_timeout(options_.get_duration("connect_timeout"));
  shared_->outgoing.set_limit(static_cast<std::size_t>(options_.get_int("max_outgoing_bytes")));
  shared_->envelope.configure(
      options_, scheme.scheme, std::move(connect.trace),
      [shared = shared_.get()](const std::string& what) {  // the envelope is a part of shared_
        shared->emit_error(make_error_code(errc::handler_failed), what);
      });
  pool_->set_on_escaped([weak = std::weak_ptr<ClientShared>(shared_)](const std::string& what) {
    if (auto shared = weak.lock())
      shared->emit_error(make_error_code(errc::handler_failed),
                         "a handler thread's job threw: " + what);
  });
}

void ClientCore::start(const SchemeInfo& scheme) {
  ops_ = std::make_shared<OperationTracker>(
      shared_->strand, std::shared_ptr<const Connectivity>(shared_, &shared_->connectivity),
      anchored_pool(shared_, shared_->operation_blocks), shared_->clock);
  // Set before the adapter exists (its io thread may report at once). Posted: the adapter is
  // in the middle of its own handler when it reports the retry.
  shared_->on_retry_scheduled = [weak = std::weak_ptr<OperationTracker>(ops_),
                                 strand = shared_->strand] {
    asio::post(strand, [weak] {
      if (auto ops = weak.lock()) ops->recheck_connectivity();
    });
  };
  AdapterContext context(shared_->strand, url_, options_, shared_);
  adapter_ = scheme.factory(context);
  shared_->caps = adapter_->capabilities();
  set_up_requests_over_topics();
  ops_->set_on_idle([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_drain();
  });
}

void ClientCore::set_up_requests_over_topics() {
  auto& caps = shared_->caps;
  if (caps.request_reply) return;
  no_request_reply_ = scheme() + " has no request/reply";
  if (!caps.publish || !caps.subscribe) return;
  const std::string unique = TopicRequests::unique_name();
  std::string reply_topic;
  try {
    reply_topic = adapter_->reply_topic("polybus.reply." + unique);
  } catch (const Error& e) {
    no_request_reply_ = e.what();
    return;
  }
  if (!shared_->envelope.on()) {
    no_request_reply_ +=
        " of its own: with envelope=cloudevents it runs over topics (the request's headers carry "
        "its correlation id and reply topic)";
    return;
  }
  // Replies are small and answered at once: enough in flight that concurrent requests do not
  // wait for each other's acknowledgements.
  constexpr std::uint32_t kMinReplyInFlight = 64;
  topic_requests_ =
      std::make_shared<TopicRequests>(weak_from_this(), shared_, unique, std::move(reply_topic),
                                      std::max(default_max_in_flight_, kMinReplyInFlight));
  caps.request_reply = true;
  caps.reply_errors = true;  // a failure travels in the reply's replyerror header
  shared_->replies_over_topics = true;
}

Clock::time_point ClientCore::deadline_from(std::chrono::milliseconds timeout,
                                            Clock::time_point now) const {
  return now + (timeout.count() > 0 ? timeout : op_timeout_);
}

void ClientCore::ping(Completion done, std::chrono::milliseconds timeout) {
  if (state_.load() != State::open)
    return fail_now(std::move(done), Status(errc::closed, "ping: the client is closed"));
  const auto issued = shared_->now();
  auto deadline = deadline_from(timeout, issued);
  post_in_order([self = shared_from_this(), done = std::move(done), deadline, issued]() mutable {
    if (self->state_.load() != State::open || !self->adapter_) {
      self->shared_->complete("ping", done, Status(errc::closed, "ping: the client is closed"));
      return;
    }
    auto op = self->ops_->add(
        deadline,
        [shared = self->shared_, done = std::move(done)](std::error_code ec, std::string&&,
                                                         std::string&& cause) {
          shared->complete("ping", done, Status(ec, std::move(cause)));
        },
        "ping", issued);
    // An adapter's throw completes the ping now with its cause, not at its deadline, and stays
    // out of the io thread.
    const Operation* made = op.operation();
    try {
      self->adapter_->ping(std::move(op));
    } catch (const std::exception& e) {
      self->ops_->complete_if_pending(made, adapter_error_code(e),
                                      std::string("ping: the adapter threw: ") + e.what());
    } catch (...) {
      self->ops_->complete_if_pending(made, make_error_code(errc::invalid_argument),
                                      "ping: the adapter threw a non-standard exception");
    }
  });
}

metrics::ClientMetrics ClientCore::metrics() const {
  metrics::ClientMetrics m;
  m.client = shared_->name;
  m.scheme = shared_->scheme;
  m.totals = shared_->stats.snapshot();
  m.publish_refused = shared_->publish_refused.load(std::memory_order_relaxed);
  m.connected_endpoints = shared_->connectivity.connected_count();
  m.waiting_publishes = shared_->adapter_waiting_publishes.load(std::memory_order_relaxed);
  m.waiting_requests = shared_->adapter_waiting_requests.load(std::memory_order_relaxed) +
                       shared_->topic_requests_waiting.load(std::memory_order_relaxed);
  m.request_reply = shared_->caps.request_reply;
  m.request_round_trip = shared_->request_latency.snapshot();
  m.topics = shared_->publish_topics.snapshot();
  m.publish_nodes = shared_->publish_nodes.snapshot();
  std::vector<std::shared_ptr<SubscriptionCore>> subs;
  {
    std::lock_guard<std::mutex> lock(metric_subscriptions_mutex_);
    for (const auto& weak : metric_subscriptions_)
      if (auto sub = weak.lock(); sub && sub->active()) subs.push_back(std::move(sub));
  }
  for (const auto& sub : subs) m.subscriptions.push_back(sub->metrics());
  std::lock_guard<std::mutex> lock(metric_subscriptions_mutex_);
  for (const auto& entry : retired_) {
    const metrics::SubscriptionMetrics& figures = entry.second;
    // A live subscription of the same labels is the series; two would clash.
    const bool live =
        std::any_of(m.subscriptions.begin(), m.subscriptions.end(), [&](const auto& s) {
          return s.topic == figures.topic && s.group == figures.group &&
                 s.serving == figures.serving;
        });
    if (!live) m.subscriptions.push_back(figures);
  }
  return m;
}

void ClientCore::retire_metrics(const SubscriptionCore& sub) {
  metrics::SubscriptionMetrics figures = sub.metrics();
  std::lock_guard<std::mutex> lock(metric_subscriptions_mutex_);
  auto key = std::make_tuple(figures.topic, figures.group, figures.serving);
  if (retired_.size() >= kRetiredSubscriptions && retired_.find(key) == retired_.end())
    retired_.erase(retired_.begin());
  retired_[std::move(key)] = std::move(figures);
}

}  // namespace polybus::detail
