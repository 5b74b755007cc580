// SPDX-License-Identifier: Apache-2.0
// subscribe() and serve(): what the scheme cannot do, or the options contradict, is refused with
// the reason before anything reaches the adapter; then the subscription opens on the strand.
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/error.hpp"

namespace polybus::detail {

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
      sub->ready(adapter_error_code(e),
                 "subscribe to " + spec.topic + ": the adapter threw: " + e.what());
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
  // Not confirmed yet, it never will be: whoever waits for it hears why now, not at its timeout.
  sub->ready(make_error_code(errc::closed), sub->topic() + ": unsubscribed");
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
      deadline_from({}, shared_->now()),
      [shared = shared_, done = std::move(done), adapter_sub](std::error_code ec, std::string&&,
                                                              std::string&& cause) {
        shared->complete("unsubscribe", done, Status(ec, std::move(cause)));
      },
      "unsubscribe from " + sub->topic());
  adapter_sub->unsubscribe(std::move(op));
  check_drain();
}

}  // namespace polybus::detail
