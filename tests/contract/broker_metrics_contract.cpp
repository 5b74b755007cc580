// SPDX-License-Identifier: Apache-2.0
// Every in-process broker counts what it carried in the same terms (docs/metrics.md), whatever
// its protocol: what `polybus broker NAME --metrics` serves and users' own tests can read.
#include <algorithm>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

// The broker's metrics; a stand-in for a real server counts nothing, an in-process broker must.
std::optional<metrics::BrokerMetrics> broker_metrics(const Env& env) {
  auto m = env.broker->metrics();
  const bool real = env.name.find("-real") != std::string::npos;  // nsq-real+cloudevents too
  if (!m && !real) FAIL("in-process broker '" << env.name << "' keeps no metrics");
  return m;
}

// The broker's name for a client's topic: QuickIO's are paths ("/" + topic).
bool names(const std::string& broker_name, const std::string& topic) {
  return broker_name == topic || broker_name == "/" + topic;
}

const metrics::BrokerTopicMetrics* topic_of(const metrics::BrokerMetrics& m,
                                            const std::string& topic) {
  for (const auto& t : m.topics)
    if (names(t.topic, topic)) return &t;
  return nullptr;
}

// The topic's queues (an NSQ channel, a mem group, ...) added up.
metrics::BrokerQueueMetrics queues_of(const metrics::BrokerMetrics& m, const std::string& topic) {
  metrics::BrokerQueueMetrics sum;
  sum.topic = topic;
  for (const auto& q : m.queues) {
    if (!names(q.topic, topic)) continue;
    sum.delivered += q.delivered;
    sum.redelivered += q.redelivered;
    sum.acked += q.acked;
    sum.queued += q.queued;
    sum.in_flight += q.in_flight;
    sum.consumers += q.consumers;
  }
  return sum;
}

bool sorted(const metrics::BrokerMetrics& m) {
  const auto topic_order = [](const auto& a, const auto& b) { return a.topic < b.topic; };
  const auto queue_order = [](const auto& a, const auto& b) {
    return a.topic != b.topic ? a.topic < b.topic : a.group < b.group;
  };
  return std::is_sorted(m.topics.begin(), m.topics.end(), topic_order) &&
         std::is_sorted(m.queues.begin(), m.queues.end(), queue_order);
}

}  // namespace

CONTRACT_CASE(broker_metrics_count_what_publishers_and_subscribers_carried) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  if (!broker_metrics(env)) return skip("a real server's metrics are its own");
  constexpr int kMessages = 20;
  const std::string payload(100, 'b');
  Collector got;
  auto subscriber = env.connect();
  auto publisher = env.connect();
  const auto topic = unique_name("broker-metered");
  auto sub =
      subscriber.subscribe(topic, {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  const auto before = *broker_metrics(env);
  CHECK(before.running);
  CHECK(before.scheme == Url::parse(env.url).scheme);
  CHECK(queues_of(before, topic).consumers >= 1);

  for (int i = 0; i < kMessages; ++i)
    REQUIRE(publisher.publish_sync(topic, payload + std::to_string(i)) == std::error_code{});
  REQUIRE(got.wait_for_distinct(kMessages));
  // A broker that acks counts the acks as they arrive; one that does not, nothing in flight. (A
  // copy that timed out before its ack came is delivered again and acked then: the late ack of
  // the first copy finishes nothing.)
  REQUIRE(test::eventually([&] {
    const auto q = queues_of(*broker_metrics(env), topic);
    return q.in_flight == 0 && q.queued == 0 && (!env.caps.ack || q.acked >= kMessages);
  }));

  const auto after = *broker_metrics(env);
  CHECK(sorted(after));
  CHECK(after.connections >= 2);  // the subscriber's and the publisher's
  CHECK(after.connections_accepted >= after.connections);
  const auto* published = topic_of(after, topic);
  REQUIRE(published);
  CHECK(published->published == kMessages);
  const auto q = queues_of(after, topic);
  CHECK(q.delivered == got.total());
  CHECK(q.redelivered == q.delivered - kMessages);  // duplicates are deliveries again
  if (env.caps.ack) {
    CHECK(q.acked >= kMessages);
    CHECK(q.acked <= q.delivered);
  } else {
    CHECK(q.acked == 0);
  }
  CHECK(q.consumers >= 1);
  if (env.url.rfind("mem://", 0) != 0) {  // mem carries no bytes
    CHECK(after.bytes_received > before.bytes_received + kMessages * payload.size());
    CHECK(after.bytes_sent > before.bytes_sent + kMessages * payload.size());
  }

  // The same numbers in the text a scrape gets.
  auto named = after;
  named.broker = env.name;
  std::string text;
  metrics::write_prometheus(text, std::vector<metrics::BrokerMetrics>{named});
  const std::string published_line = "polybus_broker_published_messages_total{broker=\"" +
                                     env.name + "\",scheme=\"" + after.scheme + "\",topic=\"" +
                                     published->topic + "\"} " + std::to_string(kMessages) + "\n";
  CHECK(text.find(published_line) != std::string::npos);
  CHECK(text.find("polybus_broker_up{broker=\"" + env.name + "\",scheme=\"" + after.scheme +
                  "\"} 1\n") != std::string::npos);

  sub.unsubscribe_sync(5s);
  CHECK(subscriber.close_sync(5s) == std::error_code{});
  CHECK(publisher.close_sync(5s) == std::error_code{});
  env.broker->stop();
  const auto stopped = *broker_metrics(env);
  CHECK_FALSE(stopped.running);
  CHECK(stopped.connections == 0);
  CHECK(stopped.connections_accepted >= after.connections_accepted);  // a counter goes on
  env.broker->start();
  CHECK(broker_metrics(env)->running);
}

CONTRACT_REQUEST_CASE(broker_metrics_count_requests_and_their_answers) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  if (!broker_metrics(env)) return skip("a real server's metrics are its own");
  constexpr int kRequests = 3;
  auto responder = env.connect();
  auto requester = env.connect();
  const auto topic = unique_name("broker-metered-rpc");
  auto serving = responder.serve(topic, [](Message& m) { return std::string(m.payload()); });
  REQUIRE(serving.wait_ready(test::kWaitBound) == std::error_code{});
  // Ready once the registration is sent (MemoDB's READY has no answer): the broker counts it
  // when it arrives.
  CHECK(test::eventually([&] { return queues_of(*broker_metrics(env), topic).consumers >= 1; }));
  for (int i = 0; i < kRequests; ++i) {
    auto reply = requester.request_sync(topic, "q" + std::to_string(i), 10s);
    REQUIRE(reply.ec == std::error_code{});
  }
  // The requester has every reply: the broker relayed every answer. A request resent after its
  // resend time (MemoDB on a loaded machine) is one more, answered or not.
  const auto m = *broker_metrics(env);
  const auto* asked = topic_of(m, topic);
  REQUIRE(asked);
  CHECK(asked->published >= kRequests);
  const auto q = queues_of(m, topic);
  CHECK(q.delivered >= kRequests);
  CHECK(q.delivered <= asked->published);
  // Over topics (no request/reply of the protocol's own) on a broker without acks (Figg), it
  // sees the requests delivered and the replies published, never an answer.
  const bool over_topics = !describe_scheme(Url::parse(env.url).scheme)->capabilities.request_reply;
  if (!over_topics || env.caps.ack) CHECK(q.acked >= kRequests);
  CHECK(q.acked <= q.delivered);
  CHECK(q.consumers >= 1);
  CHECK(responder.close_sync(5s) == std::error_code{});
  CHECK(requester.close_sync(5s) == std::error_code{});
}
