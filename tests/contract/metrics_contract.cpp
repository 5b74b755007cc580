// SPDX-License-Identifier: Apache-2.0
// Metrics every adapter keeps the same way: what a publisher, a subscriber and a responder
// report matches the traffic they carried, whatever the broker.
#include <atomic>
#include <thread>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

const metrics::SubscriptionMetrics* subscription_of(const metrics::ClientMetrics& m,
                                                    const std::string& topic) {
  for (const auto& s : m.subscriptions)
    if (s.topic == topic) return &s;
  return nullptr;
}

const metrics::TopicMetrics* topic_of(const metrics::ClientMetrics& m, const std::string& topic) {
  for (const auto& t : m.topics)
    if (t.topic == topic) return &t;
  return nullptr;
}

}  // namespace

CONTRACT_CASE(metrics_count_what_a_publisher_and_a_subscriber_carried) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  constexpr int kMessages = 20;
  const std::string payload(100, 'p');
  Collector got;
  auto subscriber = env.connect();
  auto publisher = env.connect();
  const auto topic = unique_name("metered");
  auto sub =
      subscriber.subscribe(topic, {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < kMessages; ++i)
    REQUIRE(publisher.publish_sync(topic, payload + std::to_string(i)) == std::error_code{});
  REQUIRE(got.wait_for_distinct(kMessages));
  REQUIRE(test::eventually([&] {
    const auto m = subscriber.metrics();
    auto* s = subscription_of(m, topic);
    return s && s->received >= kMessages && s->in_flight == 0;
  }));

  const auto pub = publisher.metrics();
  const auto* sent = topic_of(pub, topic);
  REQUIRE(sent);
  CHECK(sent->published == kMessages);
  CHECK(sent->confirmed == kMessages);
  CHECK(sent->failed == 0);
  CHECK(sent->confirm_latency.count == kMessages);
  CHECK(pub.publish_refused == 0);
  CHECK(pub.connected_endpoints >= 1);
  if (env.url.rfind("mem://", 0) != 0) CHECK(pub.totals.bytes_out > kMessages * payload.size());

  const auto sub_metrics = subscriber.metrics();
  const auto* received = subscription_of(sub_metrics, topic);
  REQUIRE(received);
  CHECK_FALSE(received->serving);
  CHECK(received->received == got.total());
  CHECK(received->handler_time.count == got.total());
  CHECK(received->in_flight == 0);
  CHECK(received->held_messages == 0);
  CHECK(received->held_bytes == 0);
  CHECK(received->nacked == 0);
  if (env.caps.ack)
    CHECK(received->acked == got.total());
  else
    CHECK(received->acked == 0);
  CHECK(sub_metrics.connected_endpoints >= 1);
  if (env.url.rfind("mem://", 0) != 0)
    CHECK(sub_metrics.totals.bytes_in > kMessages * payload.size());

  // The same numbers in the text a scrape gets.
  std::string text;
  metrics::write_prometheus(text, {pub, sub_metrics});
  const std::string published_line = "polybus_publish_messages_total{client=\"" + pub.client +
                                     "\",scheme=\"" + pub.scheme + "\",topic=\"" + topic + "\"} " +
                                     std::to_string(kMessages) + "\n";
  CHECK(text.find(published_line) != std::string::npos);

  // Ended, the subscription keeps its last figures, after the close too: a service that prints
  // its metrics at exit prints the consumer side.
  sub.unsubscribe_sync(5s);
  const auto after_unsubscribe = subscriber.metrics();
  const auto* kept = subscription_of(after_unsubscribe, topic);
  REQUIRE(kept);
  CHECK(kept->received == got.total());
  CHECK(subscriber.close_sync(5s) == std::error_code{});
  const auto after_close = subscriber.metrics();
  const auto* still = subscription_of(after_close, topic);
  REQUIRE(still);
  CHECK(still->received == got.total());
  if (env.caps.ack) CHECK(still->acked == got.total());
  CHECK(publisher.close_sync(5s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(metrics_count_requests_and_the_replies_served) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto responder = env.connect();
  auto requester = env.connect();
  const auto topic = unique_name("metered-rpc");
  auto serving = responder.serve(topic, [](Message& m) { return std::string(m.payload()); });
  REQUIRE(serving.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i) {
    auto reply = requester.request_sync(topic, "q" + std::to_string(i), 10s);
    REQUIRE(reply.ec == std::error_code{});
  }
  const auto asked = requester.metrics();
  CHECK(asked.request_reply);
  CHECK(asked.totals.requests == 3);
  CHECK(asked.totals.replies == 3);
  CHECK(asked.request_round_trip.count == 3);
  CHECK(asked.request_round_trip.cumulative_counts.back() == 3);
  REQUIRE(test::eventually([&] {
    const auto m = responder.metrics();
    auto* s = subscription_of(m, topic);
    return s && s->replied == 3 && s->in_flight == 0;
  }));
  const auto served_metrics = responder.metrics();
  const auto* served = subscription_of(served_metrics, topic);
  REQUIRE(served);
  CHECK(served->serving);
  CHECK(served->received == 3);
  CHECK(served->handler_time.count == 3);
  CHECK(responder.close_sync(5s) == std::error_code{});
  CHECK(requester.close_sync(5s) == std::error_code{});
}

// What a client holds unsent while its broker is away is in its waiting gauges: a scheme either
// holds the operations (counted there) or settles them at once (written to a connection that
// was going, or refused while disconnected), so the gauge and the completions add up to what
// was started, and nothing is counted once everything completed.
CONTRACT_CASE(publishes_held_while_the_broker_is_away_are_the_waiting_publishes_gauge) {
  CONTRACT_REQUIRES(env.caps.publish);
  constexpr std::uint64_t kHeld = 3;
  auto client = env.connect();
  REQUIRE(client.publish_sync(unique_name("warm"), "x") == std::error_code{});
  CHECK(client.metrics().waiting_publishes == 0);
  env.broker->stop();
  std::atomic<std::uint64_t> completed{0};
  PublishOptions options;
  options.timeout = 60s;  // far past the waits below
  const auto topic = unique_name("held");
  for (std::uint64_t i = 0; i < kHeld; ++i)
    client.publish(topic, "held", options, [&](const Status&) { ++completed; });
  std::uint64_t waiting = 0;
  CHECK(test::eventually([&] {
    waiting = client.metrics().waiting_publishes;
    return waiting + completed.load() == kHeld;
  }));
  INFO("waiting " << waiting << ", completed " << completed.load());
  env.broker->start();
  CHECK(client.close_sync(10s).code() != errc::would_block_io_thread);
  CHECK(completed.load() == kHeld);
  CHECK(client.metrics().waiting_publishes == 0);
}

CONTRACT_REQUEST_CASE(requests_held_while_the_broker_is_away_are_in_the_waiting_gauges) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  constexpr std::uint64_t kHeld = 3;
  auto responder = env.connect();
  auto requester = env.connect();
  const auto topic = unique_name("held-rpc");
  auto serving = responder.serve(topic, [](Message& m) { return std::string(m.payload()); });
  REQUIRE(serving.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(requester.request_sync(topic, "warm", 10s).ec == std::error_code{});
  CHECK(requester.metrics().waiting_requests == 0);
  env.broker->stop();
  std::atomic<std::uint64_t> completed{0};
  for (std::uint64_t i = 0; i < kHeld; ++i)
    requester.request(topic, "held", 60s, [&](const Reply&) { ++completed; });
  // Over topics a request is a publish: once its reply subscription stands it waits as one.
  std::uint64_t waiting = 0;
  CHECK(test::eventually([&] {
    const auto m = requester.metrics();
    waiting = m.waiting_requests + m.waiting_publishes;
    return waiting + completed.load() == kHeld;
  }));
  INFO("waiting " << waiting << ", completed " << completed.load());
  env.broker->start();
  CHECK(requester.close_sync(10s).code() != errc::would_block_io_thread);
  CHECK(completed.load() == kHeld);
  const auto after = requester.metrics();
  CHECK(after.waiting_requests == 0);
  CHECK(after.waiting_publishes == 0);
  CHECK(responder.close_sync(10s).code() != errc::would_block_io_thread);
}
