// SPDX-License-Identifier: Apache-2.0
#include "topic_requests.hpp"

#include <asio/post.hpp>
#include <charconv>
#include <cstdio>
#include <random>

#include "client_core.hpp"
#include "polybus/error.hpp"

namespace polybus::detail {

namespace {
// A request's route is read from the wire: bounded like any other header value would be by the
// envelope, and short enough for a topic name.
constexpr std::size_t kMaxRouteLength = 256;
}  // namespace

std::string TopicRequests::unique_name() {
  std::random_device random;
  const std::uint64_t token = (std::uint64_t{random()} << 32) ^ random();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(token));
  return text;
}

TopicRequests::TopicRequests(std::weak_ptr<ClientCore> client, std::shared_ptr<ClientShared> shared,
                             std::string unique_name, std::string reply_topic,
                             std::uint32_t reply_max_in_flight)
    : client_(std::move(client)),
      shared_(std::move(shared)),
      reply_topic_(std::move(reply_topic)),
      correlation_prefix_(std::move(unique_name) + "-"),
      reply_max_in_flight_(reply_max_in_flight) {}

Status TopicRequests::address(std::string_view topic, Headers& headers,
                              std::uint64_t& correlation) {
  for (const auto name : {kCorrelationId, kReplyTo, kReplyError})
    if (headers.contains(name))
      return Status(errc::invalid_argument,
                    "request to " + std::string(topic) + ": the header '" + std::string(name) +
                        "' is the client's own over topics (it routes the reply): leave it out");
  correlation = ++next_correlation_;
  headers.set(std::string(kCorrelationId), correlation_prefix_ + std::to_string(correlation));
  headers.set(std::string(kReplyTo), reply_topic_);
  return {};
}

void TopicRequests::send(TopicName topic, Payloads payloads, std::uint64_t correlation,
                         OpCompletion request, std::shared_ptr<Headers> reply_headers,
                         Clock::time_point deadline) {
  pending_.emplace(correlation, Pending{std::move(request), std::move(reply_headers)});
  Unsent unsent{std::move(topic), std::move(payloads), correlation, deadline};
  if (confirmed_) return publish(std::move(unsent));
  unsent_.push_back(std::move(unsent));
  count_waiting();
  if (!subscription_) subscribe_replies();
}

void TopicRequests::count_waiting() {
  shared_->topic_requests_waiting.store(unsent_.size(), std::memory_order_relaxed);
}

void TopicRequests::subscribe_replies() {
  auto client = client_.lock();
  if (!client) return;
  SubscribeOptions options;
  options.max_in_flight = reply_max_in_flight_;
  options.concurrency = 1;  // each reply is a lookup and a post: one thread keeps up
  try {
    subscription_ = client->open_subscription(
        reply_topic_, std::move(options),
        [weak = weak_from_this(), strand = shared_->strand](Message& message) {
          asio::post(strand, [weak, message]() mutable {
            if (auto self = weak.lock()) self->on_reply(message);
          });
        },
        nullptr);
  } catch (const Error& e) {
    return subscription_settled(Status(e.code(), e.what()), true);
  }
  subscription_->on_settled(
      [weak = weak_from_this(), which = subscription_.get()](const Status& status, bool ended) {
        auto self = weak.lock();
        // One that failed before may end later, after the next request made another.
        if (self && self->subscription_.get() == which) self->subscription_settled(status, ended);
      });
}

void TopicRequests::subscription_settled(const Status& status, bool ended) {
  if (!status && !ended) {
    confirmed_ = true;
    auto unsent = std::move(unsent_);
    unsent_.clear();
    count_waiting();
    for (auto& one : unsent) publish(std::move(one));
    return;
  }
  // Refused or ended: what waits for it fails with the cause; the next request subscribes again.
  confirmed_ = false;
  subscription_.reset();
  const std::string cause = "the subscription to the reply topic " + reply_topic_ +
                            (ended ? " ended: " : " was refused: ") +
                            (status.cause().empty() ? std::string("closed") : status.cause());
  const std::error_code ec = status ? status.code() : make_error_code(errc::closed);
  auto unsent = std::move(unsent_);
  unsent_.clear();
  count_waiting();
  for (const auto& one : unsent) fail(one.correlation, ec, cause);
  // Sent requests whose replies can no longer arrive: the same.
  std::vector<std::uint64_t> sent;
  for (const auto& [correlation, pending] : pending_) sent.push_back(correlation);
  for (const auto correlation : sent) fail(correlation, ec, cause);
}

void TopicRequests::publish(Unsent unsent) {
  auto it = pending_.find(unsent.correlation);
  if (it == pending_.end() || it->second.request.done()) return;  // its deadline came first
  auto client = client_.lock();
  if (!client) return;
  client->publish_request(std::move(unsent.topic), std::move(unsent.payloads), unsent.deadline,
                          [weak = weak_from_this(), correlation = unsent.correlation](
                              std::error_code ec, const std::string& cause) {
                            if (auto self = weak.lock()) self->fail(correlation, ec, cause);
                          });
}

void TopicRequests::fail(std::uint64_t correlation, std::error_code ec, const std::string& cause) {
  auto it = pending_.find(correlation);
  if (it == pending_.end()) return;
  auto request = std::move(it->second.request);
  pending_.erase(it);
  request(ec, {}, cause);
}

void TopicRequests::on_reply(Message& message) {
  const auto correlation = message.headers().get(kCorrelationId);
  auto it = correlation ? pending_.find(correlation_of(*correlation)) : pending_.end();
  if (it == pending_.end()) {
    // Late (its request timed out), another client's, or not a reply at all: acked, dropped.
    if (shared_->logs(LogLevel::debug))
      shared_->log(LogLevel::debug,
                   reply_topic_ + ": a message for no waiting request (" +
                       (correlation ? std::string(kCorrelationId) + " " + std::string(*correlation)
                                    : "no " + std::string(kCorrelationId)) +
                       "): dropped");
    return;
  }
  auto pending = std::move(it->second);
  pending_.erase(it);
  if (const auto failure = message.headers().get(kReplyError)) {
    pending.request(make_error_code(errc::handler_failed), {},
                    "the server's handler failed: " + std::string(*failure));
    return;
  }
  *pending.reply_headers = message.headers();
  pending.request({}, std::string(message.payload()), {});
}

std::uint64_t TopicRequests::correlation_of(std::string_view value) const {
  if (value.size() <= correlation_prefix_.size() ||
      value.size() > correlation_prefix_.size() + 20 ||
      value.compare(0, correlation_prefix_.size(), correlation_prefix_) != 0)
    return 0;
  std::uint64_t id = 0;
  const std::string_view digits = value.substr(correlation_prefix_.size());
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  return ec == std::errc() && end == digits.data() + digits.size() ? id : 0;
}

bool TopicRequests::answerable(const Headers& headers) {
  const auto reply_to = headers.get(kReplyTo);
  const auto correlation = headers.get(kCorrelationId);
  return reply_to && correlation && !reply_to->empty() && reply_to->size() <= kMaxRouteLength &&
         !correlation->empty() && correlation->size() <= kMaxRouteLength;
}

void TopicRequests::settle_request(MessageState& message) {
  if (!shared_->caps.ack) return;
  if (auto backend = message.request_backend.lock()) backend->ack(message);
}

// A request over a topic is answered, never acknowledged alone (Message::ack refuses it as on
// every broker); these come only from the core's own paths and settle it the same way.
void TopicRequests::ack(MessageState& message) {
  settle_request(message);
}
void TopicRequests::nack(MessageState& message, std::chrono::milliseconds delay) {
  if (!shared_->caps.ack) return;
  if (auto backend = message.request_backend.lock()) backend->nack(message, delay);
}
void TopicRequests::touch(MessageState& message) {
  if (auto backend = message.request_backend.lock()) backend->touch(message);
}

void TopicRequests::reply(MessageState& message, std::string payload, std::error_code ec,
                          std::string detail) {
  const std::string& topic = message.topic_name();
  if (!answerable(message.headers)) {
    shared_->emit_error(make_error_code(errc::invalid_argument),
                        topic + ": request " + message.id.text() + " has no " +
                            std::string(kReplyTo) + " and " + std::string(kCorrelationId) +
                            " headers (at most " + std::to_string(kMaxRouteLength) +
                            " bytes each): no reply can be sent; it is acknowledged");
    return settle_request(message);
  }
  const std::string reply_to(*message.headers.get(kReplyTo));
  Headers headers{{std::string(kCorrelationId), std::string(*message.headers.get(kCorrelationId))}};
  if (ec) headers.set(std::string(kReplyError), detail.empty() ? ec.message() : detail);
  if (ec) payload.clear();
  if (auto wrapped = shared_->envelope.wrap_reply(reply_to, payload, std::move(headers)); wrapped) {
    shared_->emit_error(wrapped.code(), topic + ": reply to " + reply_to + ": " + wrapped.cause());
    return settle_request(message);
  }
  auto client = client_.lock();
  if (!client) return;
  client->publish_enveloped(
      reply_to, std::move(payload),
      [shared = shared_, what = topic + ": the reply to request " + message.id.text() + " on " +
                                reply_to](const Status& status) {
        if (status) shared->emit_error(status.code(), what + " failed: " + status.cause());
      });
  // Answered as far as this client can: the reply publish has its own completion above.
  settle_request(message);
}

}  // namespace polybus::detail
