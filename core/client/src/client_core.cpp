// SPDX-License-Identifier: Apache-2.0
#include "client_core.hpp"

#include <asio/detail/thread_context.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <future>

#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/error.hpp"
#include "stderr_log.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

namespace {
constexpr std::size_t kMaxHandlerThreads = 256;

// What an adapter's exception completes its operation with: its own code where it has one.
std::error_code code_of(const std::exception& e) {
  if (const auto* system = dynamic_cast<const std::system_error*>(&e)) return system->code();
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return std::make_error_code(std::errc::not_enough_memory);
  return make_error_code(errc::invalid_argument);  // a value the adapter could not take
}
}  // namespace

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
      std::shared_ptr<BlockPool>(shared_, &shared_->operation_blocks));
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

Status ClientCore::take_outgoing(std::string_view what, std::string_view topic, std::size_t bytes) {
  std::size_t total = 0;
  if (shared_->outgoing.take(bytes, total)) return {};
  return Status(errc::limit_exceeded,
                std::string(what) + " " + std::string(topic) + ": " +
                    limit_exceeded_text("payload bytes not completed yet, with this one",
                                        "max_outgoing_bytes", shared_->outgoing.limit(), total));
}

void ClientCore::fail_now(Completion done, Status status) {
  if (!done) return;
  asio::post(shared_->strand,
             [shared = shared_, done = std::move(done), status = std::move(status)] {
               shared->complete("an operation refused", done, status);
             });
}

void ClientCore::publish(std::string_view topic, Payloads payloads, Completion done,
                         PublishOptions options, bool batch) {
  const auto& caps = shared_->caps;
  Status refused;
  // A closed client refuses everything as closed, whatever its adapter could have done.
  if (state_.load() != State::open)
    refused = Status(errc::closed, "publish to " + std::string(topic) + ": the client is closed");
  else if (!caps.publish)
    refused = Status(errc::not_supported, scheme() + " cannot publish");
  else if (batch && !caps.batch_publish)
    refused = Status(errc::not_supported, scheme() + " has no batch publish");
  else if (options.defer.count() > 0 && !caps.deferred_publish)
    refused = Status(errc::not_supported, scheme() + " has no deferred publish");
  else if (options.defer.count() < 0)
    refused = Status(errc::invalid_argument, "publish: a negative defer");
  else if (payloads.empty())
    refused = Status(errc::invalid_argument, "publish_batch: no messages");
  else
    refused = shared_->envelope.wrap(topic, payloads, std::move(options.headers));
  std::size_t bytes = 0;
  for (const auto& payload : payloads) bytes += payload.size();
  if (!refused) refused = take_outgoing("publish to", topic, bytes);
  const std::size_t count = payloads.size();
  shared_->stats.published += count;
  if (refused) {
    shared_->stats.publish_failed += count;
    bump(shared_->publish_refused, count);
    return fail_now(std::move(done), refused);
  }
  IntakeWork work;
  work.payloads = std::move(payloads);
  work.bytes = bytes;
  work.done = std::move(done);
  work.defer = options.defer;
  work.flush_epoch = shared_->flush_epochs.enter();
  work.issued = Clock::now();
  work.deadline = deadline_from(options.timeout, work.issued);
  take_in(std::move(work), topic);
}

void ClientCore::take_in(IntakeWork&& work, std::string_view topic) {
  std::lock_guard<std::mutex> lock(intake_mutex_);
  // Named here, under the intake's lock: a run of publishes to one topic shares the last name
  // without taking the names' own lock and hashing the topic for each.
  if (last_intake_name_.str() != topic || !last_intake_name_.shared())
    last_intake_name_ = topic_names_.name(topic);
  work.topic = last_intake_name_;
  const bool first = intake_.empty();
  intake_.push_back(std::move(work));
  // Posted under the lock: a thread that finds the intake non-empty knows its drain is already
  // queued on the strand, ahead of whatever that thread posts next (a close, a subscribe).
  if (first)
    asio::post(shared_->strand,
               in_memory(drain_memory_, [self = shared_from_this()] { self->drain_intake(); }));
}

void ClientCore::drain_intake() {
  // Taken into a local vector: should a completion throw, what is left goes with the exception
  // instead of staying behind to block the next drain (the intake would never be empty again).
  std::vector<IntakeWork> taken;
  {
    std::lock_guard<std::mutex> lock(intake_mutex_);
    if (!sealed_.empty()) {  // the oldest batch is this drain's
      taken = std::move(sealed_.front());
      sealed_.pop_front();
    } else {
      taken.swap(intake_);
      intake_.swap(intake_spare_);  // an empty vector with the capacity of an earlier burst
    }
  }
  // One that fails (an adapter's exception) is reported, and the others still go: it must not
  // take the rest of the burst with it. Its operation, once made, completes at once with the
  // exception's cause (adapter_failed), not at its deadline.
  for (auto& work : taken) {
    try {
      if (work.request)
        start_request(work);
      else
        start_publish(work);
    } catch (const std::exception& e) {
      adapter_failed(work, code_of(e), std::string("the adapter failed to take it: ") + e.what());
    } catch (...) {
      adapter_failed(work, make_error_code(errc::invalid_argument),
                     "the adapter failed to take it (a non-standard exception)");
    }
  }
  taken.clear();
  std::lock_guard<std::mutex> lock(intake_mutex_);
  intake_spare_.swap(taken);  // kept for the next drain: no allocation per burst
}

void ClientCore::adapter_failed(IntakeWork& work, std::error_code ec, const std::string& why) {
  // The topic went to the adapter with the work; the operation, once made, keeps its name.
  std::string what = work.made ? ops_->complete_if_pending(work.made, ec, why) : std::string();
  if (what.empty()) what = (work.request ? "request to " : "publish to ") + work.topic.str();
  shared_->log(LogLevel::error, what + ": " + why);
}

void ClientCore::start_publish(IntakeWork& work) {
  const std::size_t count = work.payloads.size();
  // A reply over topics still goes while a close drains the handlers that send them.
  const bool takes_it =
      state_.load() == State::open ||
      (work.answers_request && state_.load() == State::closing && !adapter_closing_);
  if (!takes_it || !adapter_) {
    shared_->outgoing.give_back(work.bytes);
    shared_->stats.publish_failed += count;
    bump(shared_->publish_refused, count);
    shared_->complete(
        "publish to " + work.topic.str(), work.done,
        Status(errc::closed, "publish to " + work.topic.str() + ": the client is closed"));
    shared_->flush_epochs.leave(work.flush_epoch);
    return;
  }
  // Kept by shared_, which the completion holds. A burst is mostly one topic, whose name is
  // the one shared string (TopicNames): the last lookup serves while it is that string.
  // Replies over topics go to one topic per requesting client: counted under one name, not
  // one each, which would crowd the application's topics out of the bounded map.
  TopicCells* cells = nullptr;
  if (work.answers_request) {
    cells = &shared_->publish_topics.cells_for(TopicRequests::kRepliesMetricTopic);
  } else {
    if (!last_cells_ || work.topic.shared() != last_cells_name_) {
      last_cells_ = &shared_->publish_topics.cells_for(work.topic);
      last_cells_name_ = work.topic.shared();  // held: its address names no other topic meanwhile
    }
    cells = last_cells_;
  }
  bump(cells->published, count);
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.done), count, cells, issued = work.issued,
       bytes = work.bytes,
       epoch = work.flush_epoch](std::error_code ec, std::string&&, std::string&& cause) {
        shared->outgoing.give_back(bytes);
        (ec ? shared->stats.publish_failed : shared->stats.publish_acked) += count;
        if (ec) {
          bump(cells->failed, count);
        } else {
          bump(cells->confirmed, count);
          cells->confirm_latency.observe(ArrivalClock::now() - issued);
        }
        if (done) shared->complete("publish", done, Status(ec, std::move(cause)));
        shared->flush_epochs.leave(epoch);  // after its completion: a flush follows it
      },
      "publish to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  adapter_->publish(
      PublishWork{std::move(work.topic), std::move(work.payloads), work.defer, std::move(op)});
}

Subscription ClientCore::subscribe(std::string_view topic, SubscribeOptions options,
                                   MessageHandler handler, ServeHandler serve, BatchHandler batch,
                                   BatchOptions batch_options) {
  return Subscription(open_subscription(topic, std::move(options), std::move(handler),
                                        std::move(serve), std::move(batch), batch_options));
}

std::shared_ptr<SubscriptionCore> ClientCore::open_subscription(
    std::string_view topic, SubscribeOptions options, MessageHandler handler, ServeHandler serve,
    BatchHandler batch, BatchOptions batch_options) {
  const bool serving = static_cast<bool>(serve);
  const auto& caps = shared_->caps;
  if (state_.load() != State::open) throw Error(errc::closed, scheme() + ": client is closed");
  if (serving && !caps.request_reply)
    throw Error(errc::not_supported, "serve: " + no_request_reply_);
  if (!serving && !caps.subscribe)
    throw Error(errc::not_supported, scheme() + ": subscribe is not supported by this adapter");
  // Over topics, the servers of a topic share its requests where the protocol has groups.
  const bool serving_over_topics = serving && topic_requests_;
  if (serving_over_topics && options.group.empty() && caps.consumer_groups)
    options.group = "polybus.serve";
  if (!options.group.empty() && !caps.consumer_groups)
    throw Error(errc::not_supported, scheme() + ": consumer groups are not supported");
  if (options.from_offset && !caps.replay_from_offset)
    throw Error(errc::not_supported, scheme() + ": replay from an offset is not supported");
  const std::uint32_t concurrency =
      options.concurrency ? options.concurrency : default_concurrency_;
  const std::uint32_t max_attempts =
      options.max_attempts ? options.max_attempts : default_max_attempts_;
  if (!options.dead_letter.topic.empty()) {
    if (serving)
      throw Error(errc::invalid_argument, "serve: a dead-letter topic is for subscriptions");
    if (max_attempts == 0)
      throw Error(
          errc::invalid_argument,
          "subscribe to " + std::string(topic) +
              ": a dead-letter topic needs max_attempts "
              "(SubscribeOptions or the max_attempts option), or nothing is ever sent there");
    if (options.dead_letter.topic == topic && options.dead_letter.client.empty())
      throw Error(errc::invalid_argument, "subscribe to " + std::string(topic) +
                                              ": the dead-letter topic is the topic itself");
    const Capabilities publisher =
        options.dead_letter.client.empty() ? caps : options.dead_letter.client.capabilities();
    if (!publisher.publish)
      throw Error(errc::not_supported,
                  "subscribe to " + std::string(topic) + ": the dead-letter client cannot publish");
  }
  // A serve over topics keeps each of its handlers busy, as the protocols' own serves do.
  const std::uint32_t max_in_flight = options.max_in_flight ? options.max_in_flight
                                      : serving_over_topics
                                          ? std::max(default_max_in_flight_, concurrency)
                                          : default_max_in_flight_;
  if (batch) {
    const std::string what = "subscribe_batch to " + std::string(topic);
    if (batch_options.max_messages == 0)
      throw Error(errc::invalid_argument, what + ": BatchOptions::max_messages is 0");
    if (batch_options.max_wait.count() <= 0)
      throw Error(errc::invalid_argument, what + ": BatchOptions::max_wait must be above 0, not " +
                                              std::to_string(batch_options.max_wait.count()) +
                                              "ms");
    if (max_in_flight < batch_options.max_messages)
      throw Error(
          errc::invalid_option,
          what + ": max_in_flight=" + std::to_string(max_in_flight) +
              " is below BatchOptions::max_messages=" + std::to_string(batch_options.max_messages) +
              ": the broker would never send a full batch (raise max_in_flight, in "
              "SubscribeOptions or the URL, or lower max_messages)");
  }
  SubscriptionCore::Handlers handlers{std::move(handler), std::move(serve), std::move(batch),
                                      batch_options, std::move(options.middleware)};
  auto sub = std::make_shared<SubscriptionCore>(
      shared_from_this(), std::string(topic), options.group, std::move(handlers), concurrency,
      max_in_flight, max_attempts, std::move(options.on_discard), std::move(options.dead_letter),
      Budget::from_options(options_));
  {
    std::lock_guard<std::mutex> lock(metric_subscriptions_mutex_);
    auto& subs = metric_subscriptions_;
    if (subs.size() >= 2 * metric_subscriptions_pruned_at_ + 16) {
      subs.erase(
          std::remove_if(subs.begin(), subs.end(), [](const auto& s) { return s.expired(); }),
          subs.end());
      metric_subscriptions_pruned_at_ = subs.size();
    }
    subs.push_back(sub);
  }
  SubscribeSpec spec{std::string(topic), options.group, options.from_offset, max_in_flight};
  // On the io thread one handler runs at a time: more workers would hold jobs others could take.
  ServeSpec serve_spec{std::string(topic), handlers_on_io_thread_ ? 1 : concurrency};
  // Over topics a serve is a subscription whose messages the core answers (SubscriptionCore).
  const bool adapter_serves = serving && !serving_over_topics;
  post_in_order([self = shared_from_this(), sub, spec, serve_spec, adapter_serves] {
    if (self->state_.load() != State::open || !self->adapter_) {
      sub->ready(make_error_code(errc::closed), "client is closed");
      sub->deactivate();
      return;
    }
    self->subscriptions_.insert(sub);
    // Whatever the adapter throws fails this subscription only: out of this handler, it would
    // end the io thread (and the process).
    try {
      auto adapter_sub = adapter_serves ? self->adapter_->serve(serve_spec, sub)
                                        : self->adapter_->subscribe(spec, sub);
      sub->attach(std::move(adapter_sub));
    } catch (const Error& e) {
      sub->ready(e.code(), e.what());
      sub->deactivate();
    } catch (const std::exception& e) {
      sub->ready(code_of(e), "subscribe to " + spec.topic + ": the adapter threw: " + e.what());
      sub->deactivate();
    } catch (...) {
      sub->ready(make_error_code(errc::invalid_argument),
                 "subscribe to " + spec.topic + ": the adapter threw a non-standard exception");
      sub->deactivate();
    }
  });
  return sub;
}

void ClientCore::unsubscribe(const std::shared_ptr<SubscriptionCore>& sub,
                             std::function<void(const Status&)> done) {
  // strand
  sub->deactivate();
  sub->settle_end(Status(errc::closed, sub->topic() + ": unsubscribed"));
  retire_metrics(*sub);
  sub->drop_handlers_when_idle();
  subscriptions_.erase(sub);
  auto adapter_sub = sub->adapter();
  if (!adapter_sub || !ops_) {
    shared_->complete("unsubscribe from " + sub->topic(), done, Status{});
    return;
  }
  sub->attach(nullptr);  // the adapter's side may hold the sink: break the cycle
  auto op = ops_->add(
      deadline_from({}, Clock::now()),
      [shared = shared_, done = std::move(done), adapter_sub](std::error_code ec, std::string&&,
                                                              std::string&& cause) {
        shared->complete("unsubscribe", done, Status(ec, std::move(cause)));
      },
      "unsubscribe from " + sub->topic());
  adapter_sub->unsubscribe(std::move(op));
  check_drain();
}

void ClientCore::request(std::string_view topic, std::string payload, ReplyCompletion done,
                         RequestOptions options) {
  Status refused;
  if (state_.load() != State::open)
    refused = Status(errc::closed, "request to " + std::string(topic) + ": the client is closed");
  else if (!shared_->caps.request_reply)
    refused =
        Status(errc::not_supported, "request to " + std::string(topic) + ": " + no_request_reply_);
  std::uint64_t correlation = 0;
  if (!refused && topic_requests_)
    refused = topic_requests_->address(topic, options.headers, correlation);
  if (!refused) refused = shared_->envelope.wrap(topic, payload, std::move(options.headers));
  if (!refused) refused = take_outgoing("request to", topic, payload.size());
  ++shared_->stats.requests;
  if (refused) {
    if (done)
      asio::post(shared_->strand, [shared = shared_, done = std::move(done), refused] {
        shared->complete("request", done, Reply{refused.code(), {}, refused.cause(), {}});
      });
    return;
  }
  IntakeWork work;
  work.bytes = payload.size();
  work.payloads = Payloads(std::move(payload));
  work.reply = std::move(done);
  work.request = true;
  work.correlation = correlation;
  work.issued = Clock::now();
  work.deadline = deadline_from(options.timeout, work.issued);
  if (options.cancellation) work.cancel = CancellationAccess::state(*options.cancellation);
  take_in(std::move(work), topic);
}

bool ClientCore::cancelled_before_start(IntakeWork& work) {
  if (!work.cancel) return false;
  {
    std::lock_guard<std::mutex> lock(work.cancel->mutex);
    if (!work.cancel->cancelled) return false;
  }
  shared_->outgoing.give_back(work.bytes);
  if (topic_requests_) topic_requests_->forget(work.correlation);
  shared_->complete("request", work.reply,
                    Reply{make_error_code(errc::canceled),
                          {},
                          "request to " + work.topic.str() + ": cancelled by the caller; not sent",
                          {}});
  return true;
}

void ClientCore::arm_cancellation(const std::shared_ptr<CancelHook>& hook, std::string_view topic) {
  hook->id = on_cancel(*hook->state, [weak = weak_from_this(), hook, topic = std::string(topic),
                                      strand = shared_->strand] {
    asio::post(strand, [weak, hook, topic] {
      auto self = weak.lock();
      if (!self || hook->finished || !self->ops_) return;
      self->ops_->complete_if_pending(hook->made, make_error_code(errc::canceled),
                                      "cancelled by the caller; it was sent and may still reach "
                                      "a responder, whose reply is dropped");
    });
  });
}

void ClientCore::start_request(IntakeWork& work) {
  if (state_.load() != State::open || !adapter_) {
    shared_->outgoing.give_back(work.bytes);
    shared_->complete("request", work.reply,
                      Reply{make_error_code(errc::closed), {}, "client is closed"});
    return;
  }
  if (cancelled_before_start(work)) return;
  if (topic_requests_) return start_request_over_topics(work);
  std::shared_ptr<CancelHook> hook;
  if (work.cancel) hook = std::make_shared<CancelHook>(CancelHook{work.cancel});
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.reply), issued = work.issued, bytes = work.bytes,
       hook](std::error_code ec, std::string&& reply, std::string&& detail) {
        if (hook) hook->finish();
        shared->outgoing.give_back(bytes);
        Headers headers;
        if (!ec) {
          ++shared->stats.replies;
          shared->request_latency.observe(ArrivalClock::now() - issued);
          std::string why;
          if (shared->envelope.on() && !shared->envelope.unwrap(reply, headers, why)) {
            ++shared->stats.delivered_raw;
            if (shared->logs(LogLevel::debug))
              shared->log(LogLevel::debug, "a reply is not an envelope (" + why + "): raw");
          }
        }
        shared->complete("request", done,
                         Reply{ec, std::move(reply), std::move(detail), std::move(headers)});
      },
      "request to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  if (hook) {
    hook->made = work.made;
    arm_cancellation(hook, work.topic.str());
  }
  adapter_->request(RequestWork{work.topic.str(), std::move(work.payloads.front()), std::move(op)});
}

void ClientCore::start_request_over_topics(IntakeWork& work) {
  // What the completion needs besides the reply, in one allocation: the reply's attributes,
  // set by TopicRequests before it completes the operation, and the id to let go after.
  struct Waiting {
    Headers reply_headers;
    std::uint64_t correlation;
    std::weak_ptr<TopicRequests> requests;
    std::shared_ptr<CancelHook> hook;
  };
  auto waiting = std::make_shared<Waiting>(Waiting{{}, work.correlation, topic_requests_, nullptr});
  if (work.cancel) waiting->hook = std::make_shared<CancelHook>(CancelHook{work.cancel});
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.reply), issued = work.issued, bytes = work.bytes,
       waiting](std::error_code ec, std::string&& reply, std::string&& detail) {
        if (waiting->hook) waiting->hook->finish();
        shared->outgoing.give_back(bytes);
        if (auto requests = waiting->requests.lock()) requests->forget(waiting->correlation);
        if (!ec) {
          ++shared->stats.replies;
          shared->request_latency.observe(ArrivalClock::now() - issued);
        }
        shared->complete(
            "request", done,
            Reply{ec, std::move(reply), std::move(detail), std::move(waiting->reply_headers)});
      },
      "request to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  if (waiting->hook) {
    waiting->hook->made = work.made;
    arm_cancellation(waiting->hook, work.topic.str());
  }
  topic_requests_->send(std::move(work.topic), std::move(work.payloads), work.correlation,
                        std::move(op), std::shared_ptr<Headers>(waiting, &waiting->reply_headers),
                        work.deadline);
}

void ClientCore::publish_request(TopicName topic, Payloads payloads, Clock::time_point deadline,
                                 std::function<void(std::error_code, const std::string&)> failed) {
  if (state_.load() == State::closed || adapter_closing_ || !adapter_)
    return failed(make_error_code(errc::closed), "the client is closed");
  auto op = ops_->add(
      deadline,
      [failed](std::error_code ec, std::string&&, std::string&& cause) {
        if (ec) failed(ec, cause);
      },
      "request to ", topic.shared(), Clock::now());
  OpCompletion if_thrown = op;
  try {
    adapter_->publish(PublishWork{std::move(topic), std::move(payloads),
                                  std::chrono::milliseconds(0), std::move(op)});
  } catch (const std::exception& e) {
    if_thrown(code_of(e), {}, std::string("the adapter failed to take it: ") + e.what());
  }
}

void ClientCore::publish_enveloped(std::string_view topic, std::string payload, Completion done) {
  Status refused;
  if (state_.load() == State::closed)
    refused = Status(errc::closed, "reply to " + std::string(topic) + ": the client is closed");
  else
    refused = take_outgoing("reply to", topic, payload.size());
  ++shared_->stats.published;
  if (refused) {
    ++shared_->stats.publish_failed;
    bump(shared_->publish_refused);
    return fail_now(std::move(done), refused);
  }
  IntakeWork work;
  work.bytes = payload.size();
  work.payloads = Payloads(std::move(payload));
  work.done = std::move(done);
  work.answers_request = true;
  work.flush_epoch = shared_->flush_epochs.enter();
  work.issued = Clock::now();
  work.deadline = deadline_from({}, work.issued);
  // Not kept among the shared names: one reply topic per requesting client would fill them.
  work.topic = TopicName(std::make_shared<const std::string>(topic));
  // Now, not through the intake: a close that finds the handler done must find its reply's
  // publish pending too, or it would close the connection under it.
  try {
    start_publish(work);
  } catch (const std::exception& e) {
    adapter_failed(work, code_of(e), std::string("the adapter failed to take it: ") + e.what());
  }
}

void ClientCore::ping(Completion done, std::chrono::milliseconds timeout) {
  if (state_.load() != State::open)
    return fail_now(std::move(done), Status(errc::closed, "ping: the client is closed"));
  const auto issued = Clock::now();
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
      self->ops_->complete_if_pending(made, code_of(e),
                                      std::string("ping: the adapter threw: ") + e.what());
    } catch (...) {
      self->ops_->complete_if_pending(made, make_error_code(errc::invalid_argument),
                                      "ping: the adapter threw a non-standard exception");
    }
  });
}

void ClientCore::flush(std::chrono::milliseconds timeout, Completion done) {
  const auto deadline = deadline_from(timeout, Clock::now());
  const auto limit = timeout.count() > 0 ? timeout : op_timeout_;
  struct Flush {
    Completion done;
    std::atomic<bool> completed{false};
    std::unique_ptr<asio::steady_timer> timer;  // strand
    std::uint64_t ticket = 0;
  };
  auto flush = std::make_shared<Flush>();
  flush->done = std::move(done);
  // Exactly once, on the strand, whichever comes first: the publishes or the deadline.
  auto finish = [shared = shared_, flush](Status status) {
    if (flush->completed.exchange(true)) return;
    asio::post(shared->strand, [shared, flush, status = std::move(status)] {
      if (flush->timer) flush->timer->cancel();
      shared->complete("flush", flush->done, status);
    });
  };
  flush->ticket = shared_->flush_epochs.wait([finish] { finish(Status{}); });
  if (flush->ticket == 0) return finish(Status{});
  asio::post(shared_->strand, [shared = shared_, flush, finish, deadline, limit] {
    if (flush->completed.load()) return;
    flush->timer = std::make_unique<asio::steady_timer>(shared->strand, deadline);
    flush->timer->async_wait([shared, flush, finish, limit](std::error_code ec) {
      std::uint64_t pending = 0;
      if (ec || !shared->flush_epochs.cancel(flush->ticket, pending)) return;
      finish(Status(errc::timeout, "flush: " + std::to_string(pending) +
                                       " publish(es) made before it still pending after " +
                                       std::to_string(limit.count()) + "ms"));
    });
  });
}

void ClientCore::close(std::chrono::milliseconds timeout, Completion done) {
  post_in_order([self = shared_from_this(), timeout, done = std::move(done)]() mutable {
    if (self->state_.load() == State::closed) {
      self->shared_->complete("close", done, Status{});
      return;
    }
    if (done) self->close_waiters_.push_back(std::move(done));
    if (self->state_.load() == State::closing) return;
    self->state_.store(State::closing);
    self->close_deadline_ = Clock::now() + timeout;
    self->close_timeout_ = timeout;
    // Stop intake: no new messages reach handlers that will have to be drained.
    for (auto& sub : self->subscriptions_) {
      // The replies of requests still waiting are let in: the close waits for them.
      const auto& requests = self->topic_requests_;
      if (requests && requests->is_reply_subscription(sub.get())) continue;
      if (sub->adapter()) sub->adapter()->pause();
      sub->drain_held();
      sub->closing();
    }
    self->close_timer_ = std::make_unique<asio::steady_timer>(self->shared_->strand);
    self->close_timer_->expires_at(self->close_deadline_);
    // The wait holds the core: a close goes on to its end after the last handle let go (dropped
    // on a thread that could not wait for it). Replaced or cancelled, it lets go of it.
    self->close_timer_->async_wait([self](std::error_code ec) {
      if (!ec) self->finish_close(true);
    });
    self->check_drain();
  });
}

void ClientCore::check_drain() {
  if (state_.load() != State::closing || adapter_closing_) return;
  if (ops_ && ops_->live() > 0) return;
  for (auto& sub : subscriptions_)
    if (!sub->idle()) return;
  // A handler that answered and returned before the close began: its ack or reply is queued
  // on the strand, ahead of this check posted again, and may start an operation (a reply over
  // topics) that the close must wait for.
  if (shared_->responses.waiting()) {
    asio::post(shared_->strand, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->check_drain();
    });
    return;
  }
  finish_close(false);
}

Status ClientCore::what_the_close_deadline_cut_off() const {
  const std::size_t operations = ops_ ? ops_->live() : 0;
  std::size_t messages = 0;
  for (const auto& sub : subscriptions_) messages += sub->pending();
  if (operations == 0 && messages == 0) return {};
  std::string cause =
      "close: its deadline (" + std::to_string(close_timeout_.count()) + "ms) passed with ";
  if (operations > 0)
    cause += std::to_string(operations) + " operation(s) unfinished (they fail with closed)";
  if (operations > 0 && messages > 0) cause += " and ";
  if (messages > 0)
    cause += std::to_string(messages) +
             " message(s) still being handled or waiting for a handler (not acknowledged: " +
             (shared_->caps.ack ? "the broker redelivers them)"
                                : "the protocol cannot redeliver "
                                  "them)");
  return Status(errc::timeout, std::move(cause));
}

void ClientCore::finish_close(bool deadline_passed) {
  if (adapter_closing_ || state_.load() != State::closing) return;
  adapter_closing_ = true;
  // What the deadline cut off is said in close's result, not dropped silently.
  const Status result = deadline_passed ? what_the_close_deadline_cut_off() : Status();
  // Cut off by the close, not by the connections the adapter is about to drop: each fails with
  // closed before the adapter's close can fail it as disconnected.
  if (ops_ && result)
    ops_->fail_all(make_error_code(errc::closed), "client closed: " + result.cause());
  // Give the adapter until the deadline (at least a moment) to close its connections.
  auto adapter_deadline = std::max(close_deadline_, Clock::now() + std::chrono::milliseconds(50));
  auto finished = std::make_shared<bool>(false);
  // Holds the core until it ran, as the close timer's wait did.
  auto complete = [self = shared_from_this(), finished, result] {
    if (*finished) return;
    *finished = true;
    if (self->ops_) self->ops_->fail_all(make_error_code(errc::closed), "client closed");
    for (auto& sub : self->subscriptions_) {
      sub->deactivate();
      sub->ended(make_error_code(errc::closed), "client closed");
      self->retire_metrics(*sub);
      sub->drop_handlers();
      sub->attach(nullptr);  // the adapter's side may hold the sink: break the cycle
    }
    self->subscriptions_.clear();
    self->state_.store(State::closed);
    self->close_timer_.reset();
    self->ops_->set_on_idle(nullptr);
    // Strand: the close is said done.
    struct Finish {
      std::shared_ptr<ClientCore> self;
      Status result;
      void operator()() {
        self->shared_->notify_state(StateEvent{ConnectionState::closed, {}, {}});
        self->shared_->closed.store(true);
        auto waiters = std::move(self->close_waiters_);
        for (auto& waiter : waiters) self->shared_->complete("close", waiter, result);
        self->adapter_.reset();
      }
    };
    Finish finish{self, result};
    // Said once no handler thread still holds the client (a job's captures go just after its
    // handler returned): an application may destroy its io_context when told, and the last
    // references then go on its thread, not on a pool thread racing that. Past the deadline a
    // handler that never returns must not hold the close: it is said at once.
    if (result) return finish();
    // The pool thread touches the io_context only; the strand is reached from an io thread, and
    // what holds the client travels in `finish`. Until then the io_context has work: a client
    // whose last handle went has let its own io thread run out, which would otherwise return
    // before this post and leave the close unsaid. That count travels with the post too, so it
    // is given back on the io thread after `finish`, never on the pool thread.
    auto io = self->shared_->strand.get_inner_executor();
    auto held = asio::prefer(io, asio::execution::outstanding_work.tracked);
    self->pool_->when_idle([io, held = std::move(held), finish = std::move(finish)]() mutable {
      asio::post(io, [held = std::move(held), finish = std::move(finish)]() mutable {
        auto& strand = finish.self->shared_->strand;
        asio::dispatch(strand, std::move(finish));
      });
    });
  };
  close_timer_->expires_at(adapter_deadline);
  close_timer_->async_wait([complete](std::error_code ec) {
    if (!ec) complete();
  });
  adapter_->close(adapter_deadline,
                  [complete, strand = shared_->strand] { asio::post(strand, complete); });
}

ClientHandle::~ClientHandle() {
  if (!core) return;
  // What the close may take, and a margin for the adapter's last step (finish_close gives it at
  // least 50 ms) and the io thread's exit: no fixed extra seconds.
  constexpr auto kMargin = std::chrono::milliseconds(200);
  const auto deadline = Clock::now() + close_timeout + kMargin;
  // Any event loop, not only the client's: waiting there would stall every other thing it runs.
  const bool on_an_event_loop = asio::detail::thread_context::top_of_thread_call_stack() != nullptr;
  const bool must_not_wait = on_io_context() || on_handler_thread() || on_an_event_loop ||
                             (!runtime->own && runtime->io->stopped());
  if (!core->closed()) {
    if (must_not_wait) {
      core->close(close_timeout, {});
    } else {
      // Shared with the completion, which may run after this frame is gone.
      auto closed = std::make_shared<std::promise<void>>();
      auto done = closed->get_future();
      core->close(close_timeout, [closed](const Status&) { closed->set_value(); });
      done.wait_until(deadline);
    }
  }
  core.reset();
  if (must_not_wait)
    runtime->let_go();
  else
    runtime->finish(deadline);
}

}  // namespace polybus::detail

namespace polybus::detail {

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
