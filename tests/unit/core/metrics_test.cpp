// SPDX-License-Identifier: Apache-2.0
// Metrics: the latency buckets, the per-topic cap, the Prometheus text, and a client's counts
// checked against the traffic it carried (over mem://).
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/metrics/src/metric_cells.hpp"
#include "polybus/metrics/counters_by_name.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of the sample line that starts with `prefix` (name and labels), or -1.
double sample(const std::string& text, const std::string& prefix) {
  for (const auto& line : lines_of(text))
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  return -1;
}

const metrics::SubscriptionMetrics* find_subscription(const metrics::ClientMetrics& m,
                                                      const std::string& topic) {
  for (const auto& s : m.subscriptions)
    if (s.topic == topic) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("metrics: latencies land in the bucket whose bound they do not exceed", "[metrics]") {
  detail::LatencyCells cells;
  cells.observe(microseconds(50));
  cells.observe(microseconds(100));  // on the bound: counted in it (le)
  cells.observe(microseconds(150));
  cells.observe(milliseconds(3));
  cells.observe(std::chrono::seconds(20));  // beyond the last bound: +Inf only
  cells.observe(-microseconds(5));          // a clock step back counts as 0
  const auto h = cells.snapshot();
  REQUIRE(h.upper_bounds.size() == 17);
  REQUIRE(h.cumulative_counts.size() == 17);
  CHECK(std::isinf(h.upper_bounds.back()));
  CHECK(h.cumulative_counts[0] == 3);   // le 0.0001: 0, 50 µs, 100 µs
  CHECK(h.cumulative_counts[1] == 4);   // le 0.00025: + 150 µs
  CHECK(h.cumulative_counts[5] == 5);   // le 0.005: + 3 ms
  CHECK(h.cumulative_counts[15] == 5);  // le 10
  CHECK(h.cumulative_counts[16] == 6);  // +Inf
  CHECK(h.count == 6);
  CHECK(h.sum_seconds == Approx(20.0033).epsilon(1e-9));
}

TEST_CASE("metrics: a latency on each bound is counted in it, a nanosecond more in the next",
          "[metrics]") {
  const auto& bounds = detail::LatencyCells::kUpperBounds;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    INFO("bound " << bounds[i]);
    const auto on = std::chrono::nanoseconds(static_cast<std::int64_t>(bounds[i] * 1e9 + 0.5));
    detail::LatencyCells cells;
    cells.observe(on);
    cells.observe(on + std::chrono::nanoseconds(1));
    const auto h = cells.snapshot();
    CHECK(h.cumulative_counts[i] == 1);
    CHECK(h.cumulative_counts[i + 1] == 2);
    if (i > 0) CHECK(h.cumulative_counts[i - 1] == 0);
  }
}

TEST_CASE("metrics: past the topic cap, publishes are counted under _other", "[metrics]") {
  detail::TopicCellsMap map;
  for (std::size_t i = 0; i < detail::TopicCellsMap::kMaxTopics + 50; ++i)
    detail::bump(map.cells_for("topic-" + std::to_string(i)).published);
  const auto topics = map.snapshot();
  REQUIRE(topics.size() == detail::TopicCellsMap::kMaxTopics);
  std::uint64_t total = 0, other = 0;
  for (const auto& t : topics) {
    total += t.published;
    if (t.topic == "_other") other = t.published;
  }
  CHECK(total == detail::TopicCellsMap::kMaxTopics + 50);
  CHECK(other == 51);  // the last room's own topic, and the 50 after it
  // A topic seen before the cap keeps its own series.
  detail::bump(map.cells_for("topic-0").published);
  for (const auto& t : map.snapshot())
    if (t.topic == "topic-0") CHECK(t.published == 2);
}

TEST_CASE("metrics: an application topic named _other takes the overflow, nothing is lost",
          "[metrics]") {
  detail::TopicCellsMap map;
  detail::bump(map.cells_for("_other").published);
  for (std::size_t i = 0; i < detail::TopicCellsMap::kMaxTopics + 50; ++i)
    detail::bump(map.cells_for("topic-" + std::to_string(i)).published);
  detail::bump(map.cells_for("_other").published);
  const auto topics = map.snapshot();
  CHECK(topics.size() == detail::TopicCellsMap::kMaxTopics - 1);  // "_other" counted once
  std::uint64_t total = 0;
  for (const auto& t : topics) total += t.published;
  CHECK(total == detail::TopicCellsMap::kMaxTopics + 52);
}

TEST_CASE(
    "metrics: the Prometheus text groups each family, escapes labels and closes "
    "histograms with +Inf",
    "[metrics]") {
  metrics::ClientMetrics a;
  a.client = "svc \"a\"\\\n";
  a.scheme = "nsq";
  a.totals.bytes_in = 1234;
  metrics::TopicMetrics t;
  t.topic = "orders";
  t.published = 3;
  t.confirmed = 2;
  t.failed = 1;
  detail::LatencyCells latency;
  latency.observe(milliseconds(2));
  latency.observe(milliseconds(2));
  t.confirm_latency = latency.snapshot();
  a.topics.push_back(t);
  a.waiting_publishes = 7;
  metrics::ClientMetrics b = a;
  b.client = "b";
  b.request_reply = true;
  b.waiting_requests = 5;
  std::string text;
  metrics::write_prometheus(text, {a, b});
  const auto lines = lines_of(text);
  // Each family: one HELP, one TYPE, then all of its samples together.
  std::set<std::string> families_done;
  std::string current;
  for (const auto& line : lines) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      CHECK(families_done.insert(current).second);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      CHECK(line.substr(7, current.size()) == current);
      continue;
    }
    CHECK(line.rfind(current, 0) == 0);
  }
  const std::string escaped = "client=\"svc \\\"a\\\"\\\\\\n\"";
  CHECK(sample(text, "polybus_publish_messages_total{" + escaped +
                         ",scheme=\"nsq\",topic=\"orders\"}") == 3);
  CHECK(sample(text,
               "polybus_publish_failed_total{client=\"b\",scheme=\"nsq\",topic=\"orders\"}") == 1);
  CHECK(sample(text,
               "polybus_publish_confirm_seconds_bucket{client=\"b\",scheme=\"nsq\","
               "topic=\"orders\",le=\"0.001\"}") == 0);
  CHECK(sample(text,
               "polybus_publish_confirm_seconds_bucket{client=\"b\",scheme=\"nsq\","
               "topic=\"orders\",le=\"0.0025\"}") == 2);
  CHECK(sample(text,
               "polybus_publish_confirm_seconds_bucket{client=\"b\",scheme=\"nsq\","
               "topic=\"orders\",le=\"+Inf\"}") == 2);
  CHECK(sample(text,
               "polybus_publish_confirm_seconds_count{client=\"b\",scheme=\"nsq\","
               "topic=\"orders\"}") == 2);
  CHECK(sample(text,
               "polybus_publish_confirm_seconds_sum{client=\"b\",scheme=\"nsq\","
               "topic=\"orders\"}") == Approx(0.004));
  CHECK(sample(text, "polybus_received_bytes_total{client=\"b\",scheme=\"nsq\"}") == 1234);
  // Request series only for a client whose scheme has requests.
  CHECK(sample(text, "polybus_requests_total{client=\"b\",scheme=\"nsq\"}") == 0);
  CHECK(text.find("polybus_requests_total{" + escaped) == std::string::npos);
  // The client-side queues.
  CHECK(sample(text, "polybus_waiting_publishes{" + escaped + ",scheme=\"nsq\"}") == 7);
  CHECK(sample(text, "polybus_waiting_requests{client=\"b\",scheme=\"nsq\"}") == 5);
  CHECK(text.find("polybus_waiting_requests{" + escaped) == std::string::npos);
  // The callback form sees the same samples.
  std::size_t samples = 0;
  metrics::for_each_sample({a, b}, [&](const metrics::Sample& s) {
    CHECK((s.type == "counter" || s.type == "gauge" || s.type == "histogram"));
    ++samples;
  });
  std::size_t sample_lines = 0;
  for (const auto& line : lines) sample_lines += line.rfind('#', 0) != 0;
  CHECK(samples == sample_lines);
}

TEST_CASE("metrics: a client's counts match the traffic it carried", "[metrics]") {
  ConnectOptions options;
  options.name = "orders-service";
  const std::string url = "mem://" + unique_name("metrics") + "?requeue_delay=1ms";
  auto client = connect(url, options);
  Latch delivered, discarded;
  SubscribeOptions group;
  group.group = "billing";
  group.max_attempts = 2;
  group.on_discard = [&](const Message&) { discarded.count_down(); };
  auto sub = client.subscribe("orders", group, [&](Message& m) {
    if (m.payload() == "bad") {
      m.nack();  // twice; the third attempt is discarded
      return;
    }
    m.ack();
    delivered.count_down();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  auto responder = client.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(responder.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 10; ++i) REQUIRE(client.publish_sync("orders", "ok") == std::error_code{});
  REQUIRE(client.publish_sync("orders", "bad") == std::error_code{});
  for (int i = 0; i < 3; ++i) REQUIRE(client.publish_sync("audit", "x") == std::error_code{});
  for (int i = 0; i < 4; ++i) REQUIRE(client.request_sync("echo", "ping").ec == std::error_code{});
  REQUIRE(delivered.wait_for(10));
  REQUIRE(discarded.wait_for(1));
  REQUIRE(eventually([&] {
    const auto m = client.metrics();
    auto* s = find_subscription(m, "orders");
    return s && s->acked == 11 && s->in_flight == 0;
  }));

  const auto m = client.metrics();
  CHECK(m.client == "orders-service");
  CHECK(m.scheme == "mem");
  CHECK(m.request_reply);
  REQUIRE(m.topics.size() == 2);  // sorted by topic
  CHECK(m.topics[0].topic == "audit");
  CHECK(m.topics[0].published == 3);
  CHECK(m.topics[0].confirmed == 3);
  CHECK(m.topics[1].topic == "orders");
  CHECK(m.topics[1].published == 11);
  CHECK(m.topics[1].confirmed == 11);
  CHECK(m.topics[1].failed == 0);
  CHECK(m.topics[1].confirm_latency.count == 11);
  const auto* orders = find_subscription(m, "orders");
  REQUIRE(orders);
  CHECK(orders->group == "billing");
  CHECK_FALSE(orders->serving);
  CHECK(orders->received == 13);  // 10, and "bad" three times
  CHECK(orders->acked == 11);     // 10, and the discarded one
  CHECK(orders->nacked == 2);
  CHECK(orders->discarded == 1);
  CHECK(orders->in_flight == 0);
  CHECK(orders->held_messages == 0);
  CHECK(orders->handler_time.count == 12);  // the discarded attempt reaches no handler
  const auto* echo = find_subscription(m, "echo");
  REQUIRE(echo);
  CHECK(echo->serving);
  CHECK(echo->received == 4);
  CHECK(echo->replied == 4);
  CHECK(echo->in_flight == 0);
  CHECK(m.totals.requests == 4);
  CHECK(m.totals.replies == 4);
  CHECK(m.request_round_trip.count == 4);
  CHECK(m.connected_endpoints == 1);

  std::string text;
  metrics::write_prometheus(text, {m});
  CHECK(sample(text,
               "polybus_nacked_messages_total{client=\"orders-service\",scheme=\"mem\","
               "topic=\"orders\",group=\"billing\",kind=\"subscribe\"}") == 2);
  CHECK(sample(text, "polybus_request_seconds_count{client=\"orders-service\",scheme=\"mem\"}") ==
        4);

  // A publish the client refuses is counted as refused, under no topic.
  REQUIRE(client.close_sync(kWaitBound) == std::error_code{});
  CHECK(client.publish_sync("orders", "late") == errc::closed);
  CHECK(client.metrics().publish_refused == 1);
  CHECK(client.metrics().topics[1].published == 11);
}

TEST_CASE("metrics: clients without a name get distinct client labels", "[metrics]") {
  auto a = connect("mem://" + unique_name("m"));
  auto b = connect("mem://" + unique_name("m"));
  CHECK(a.metrics().client != b.metrics().client);
  CHECK_FALSE(a.metrics().client.empty());
}

TEST_CASE(
    "metrics: a broker's text has its families once each, labelled by broker, topic and "
    "group",
    "[metrics]") {
  metrics::BrokerMetrics a;
  a.broker = "nsq";
  a.scheme = "nsq";
  a.running = true;
  a.connections = 2;
  a.connections_accepted = 5;
  a.bytes_received = 100;
  a.bytes_sent = 200;
  a.topics.push_back({"orders", 7, 1});
  metrics::BrokerQueueMetrics billing;
  billing.topic = "orders";
  billing.group = "billing \"eu\"";
  billing.delivered = 6;
  billing.redelivered = 1;
  billing.acked = 4;
  billing.queued = 1;
  billing.in_flight = 1;
  billing.consumers = 3;
  a.queues.push_back(billing);
  metrics::BrokerMetrics b;
  b.broker = "figg";
  b.scheme = "figg";
  std::string text;
  metrics::write_prometheus(text, std::vector<metrics::BrokerMetrics>{a, b});

  std::set<std::string> families;
  for (const auto& line : lines_of(text))
    if (line.rfind("# TYPE ", 0) == 0) CHECK(families.insert(line.substr(7)).second);
  CHECK(families.count("polybus_broker_up gauge") == 1);
  CHECK(families.count("polybus_broker_published_messages_total counter") == 1);
  CHECK(families.count("polybus_broker_queued_messages gauge") == 1);
  CHECK(sample(text, "polybus_broker_up{broker=\"nsq\",scheme=\"nsq\"}") == 1);
  CHECK(sample(text, "polybus_broker_up{broker=\"figg\",scheme=\"figg\"}") == 0);
  CHECK(sample(text, "polybus_broker_connections{broker=\"nsq\",scheme=\"nsq\"}") == 2);
  CHECK(sample(text, "polybus_broker_connections_accepted_total{broker=\"nsq\",scheme=\"nsq\"}") ==
        5);
  CHECK(sample(text, "polybus_broker_received_bytes_total{broker=\"nsq\",scheme=\"nsq\"}") == 100);
  CHECK(sample(text, "polybus_broker_sent_bytes_total{broker=\"nsq\",scheme=\"nsq\"}") == 200);
  CHECK(sample(text,
               "polybus_broker_published_messages_total{broker=\"nsq\",scheme=\"nsq\","
               "topic=\"orders\"}") == 7);
  CHECK(sample(text,
               "polybus_broker_stored_messages{broker=\"nsq\",scheme=\"nsq\","
               "topic=\"orders\"}") == 1);
  const std::string group =
      "broker=\"nsq\",scheme=\"nsq\",topic=\"orders\",group=\"billing \\\"eu\\\"\"";
  CHECK(sample(text, "polybus_broker_delivered_messages_total{" + group + "}") == 6);
  CHECK(sample(text, "polybus_broker_redelivered_messages_total{" + group + "}") == 1);
  CHECK(sample(text, "polybus_broker_acked_messages_total{" + group + "}") == 4);
  CHECK(sample(text, "polybus_broker_queued_messages{" + group + "}") == 1);
  CHECK(sample(text, "polybus_broker_in_flight_messages{" + group + "}") == 1);
  CHECK(sample(text, "polybus_broker_consumers{" + group + "}") == 3);
  // A broker with no topics has no topic series, and nothing of the clients' families.
  CHECK(text.find("topic=\"\"") == std::string::npos);
  CHECK(text.find("polybus_publish_messages_total") == std::string::npos);
}

TEST_CASE("metrics: counters per name from the wire stop growing at their bound", "[metrics]") {
  CountersByName<std::uint64_t> counts(4);
  for (int i = 0; i < 100; ++i) ++counts["name-" + std::to_string(i)];
  ++counts["name-1"];
  REQUIRE(counts.all().size() == 4);
  CHECK(counts.all().at("name-0") == 1);
  CHECK(counts.all().at("name-1") == 2);
  CHECK(counts.all().at("name-2") == 1);
  CHECK(counts.all().at("_other") == 97);  // every name after the first three
}
