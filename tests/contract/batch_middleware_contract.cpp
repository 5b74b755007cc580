// SPDX-License-Identifier: Apache-2.0
// Batch consumption, handler middleware and flush: the same on every broker that subscribes (or
// publishes), through the URL alone.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

// Batches as the handler saw them: the payloads of each, and the attempts of each message.
struct Batches {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::vector<std::string>> batches;
  std::map<std::string, std::uint32_t> max_attempts;  // by payload
  bool closing = false;                               // batches handed from here on are the close's

  void add(Batch& batch) {
    std::lock_guard<std::mutex> lock(mutex);
    if (closing) return;
    std::vector<std::string> payloads;
    for (Message& m : batch) {
      payloads.emplace_back(m.payload());
      auto& seen = max_attempts[payloads.back()];
      seen = std::max(seen, m.attempts());
    }
    batches.push_back(std::move(payloads));
    cv.notify_all();
  }
  template <typename Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, test::kWaitBound, [&] { return pred(); });
  }
  std::size_t distinct() {  // with mutex held
    std::set<std::string> all;
    for (auto& b : batches) all.insert(b.begin(), b.end());
    return all.size();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex);
    closing = true;
  }
};

metrics::SubscriptionMetrics metrics_of(const Client& client, const std::string& topic) {
  for (const auto& s : client.metrics().subscriptions)
    if (s.topic == topic) return s;
  return {};
}

// Waits (bounded) until the subscription's metrics satisfy pred.
template <typename Pred>
bool wait_for_metrics(const Client& client, const std::string& topic, Pred pred) {
  Latch never;
  const auto give_up = std::chrono::steady_clock::now() + test::kWaitBound;
  while (std::chrono::steady_clock::now() < give_up) {
    if (pred(metrics_of(client, topic))) return true;
    never.wait_for(1, 20ms);  // a failure bound between looks, not a synchronisation
  }
  return false;
}

}  // namespace

CONTRACT_CASE(a_batch_is_handed_over_when_it_holds_max_messages_and_acked_together) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Batches seen;
  auto client = env.connect();
  auto topic = unique_name("batch-full");
  SubscribeOptions options;
  options.max_in_flight = 100;
  options.concurrency = 1;
  // max_wait far past the test's bound: only a full batch can be handed over meanwhile.
  BatchOptions batch{5, std::chrono::minutes(10)};
  auto sub = client.subscribe_batch(topic, options, batch, [&](Batch& b) { seen.add(b); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 20; ++i)
    REQUIRE(client.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(seen.wait([&] { return seen.batches.size() >= 4; }));
  {
    std::lock_guard<std::mutex> lock(seen.mutex);
    for (const auto& b : seen.batches) CHECK(b.size() == 5);
    CHECK(seen.distinct() == 20);
    if (env.caps.ack)
      for (const auto& [payload, attempts] : seen.max_attempts) CHECK(attempts == 1);
  }
  const auto m = metrics_of(client, topic);
  CHECK(m.batches == 4);
  CHECK(m.batched_messages == 20);
  const bool acks = env.caps.ack;
  CHECK(wait_for_metrics(client, topic, [acks](const auto& s) {
    return s.in_flight == 0 && (!acks || s.acked == 20);
  }));
  seen.close();
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_batch_is_handed_over_at_max_wait_with_what_it_holds) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Batches seen;
  auto client = env.connect();
  auto topic = unique_name("batch-wait");
  SubscribeOptions options;
  options.max_in_flight = 1000;
  auto sub = client.subscribe_batch(topic, options, BatchOptions{1000, 100ms},
                                    [&](Batch& b) { seen.add(b); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(client.publish_sync(topic, "w" + std::to_string(i)) == std::error_code{});
  REQUIRE(seen.wait([&] { return seen.distinct() == 3; }));
  seen.close();
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_batch_is_handed_over_once_the_broker_will_send_no_more_until_it_is_answered) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && env.caps.ack);
  Batches seen;
  auto client = env.connect();
  auto topic = unique_name("batch-credit");
  SubscribeOptions options;
  options.max_in_flight = 10;
  options.concurrency = 1;
  // Neither full (10) nor due (10 minutes): only the credit rule hands these over.
  auto sub = client.subscribe_batch(topic, options, BatchOptions{10, std::chrono::minutes(10)},
                                    [&](Batch& b) { seen.add(b); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  sub.set_max_in_flight(2);
  for (int i = 0; i < 8; ++i)
    REQUIRE(client.publish_sync(topic, "c" + std::to_string(i)) == std::error_code{});
  REQUIRE(seen.wait([&] { return seen.distinct() == 8; }));
  {
    std::lock_guard<std::mutex> lock(seen.mutex);
    for (const auto& b : seen.batches) CHECK(b.size() < 10);
  }
  seen.close();
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_batch_handler_that_throws_has_its_batch_redelivered_and_one_it_nacks_alone) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && env.caps.ack);
  Batches seen;
  std::atomic<int> calls{0};
  auto client = env.connect({{"requeue_delay", "20ms"}, {"max_requeue_delay", "100ms"}});
  auto topic = unique_name("batch-throw");
  SubscribeOptions options;
  options.max_in_flight = 100;
  options.concurrency = 1;
  auto sub = client.subscribe_batch(topic, options, BatchOptions{3, std::chrono::minutes(10)},
                                    [&](Batch& b) {
                                      seen.add(b);
                                      const int call = ++calls;
                                      if (call == 1) throw std::runtime_error("database down");
                                      // The second batch: its first message alone goes back.
                                      if (call == 2) b[0].nack(std::chrono::milliseconds(0));
                                    });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(client.publish_sync(topic, "t" + std::to_string(i)) == std::error_code{});
  // 3 thrown back, 3 again (one nacked), then that one with two more.
  for (int i = 3; i < 5; ++i)
    REQUIRE(client.publish_sync(topic, "t" + std::to_string(i)) == std::error_code{});
  REQUIRE(seen.wait([&] { return seen.batches.size() >= 3; }));
  {
    std::lock_guard<std::mutex> lock(seen.mutex);
    CHECK(seen.distinct() == 5);
    std::size_t redelivered = 0;
    for (const auto& [payload, attempts] : seen.max_attempts) redelivered += attempts >= 2;
    CHECK(redelivered >= 3);  // the thrown batch's three, at least
  }
  CHECK(wait_for_metrics(client, topic, [](const auto& s) { return s.nacked >= 4; }));
  seen.close();
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_batch_larger_than_max_in_flight_is_refused_naming_both) {
  CONTRACT_REQUIRES(env.caps.subscribe);
  auto client = env.connect();
  SubscribeOptions options;
  options.max_in_flight = 4;
  try {
    client.subscribe_batch(unique_name("batch-refused"), options, BatchOptions{5, 100ms},
                           [](Batch&) {});
    FAIL("subscribe_batch took max_in_flight=4 with max_messages=5");
  } catch (const Error& e) {
    CHECK(e.code() == make_error_code(errc::invalid_option));
    const std::string what = e.what();
    CHECK(what.find("max_in_flight=4") != std::string::npos);
    CHECK(what.find("max_messages=5") != std::string::npos);
  }
}

CONTRACT_CASE(close_hands_a_partial_batch_to_its_handler) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Collector got;
  auto client = env.connect();
  auto topic = unique_name("batch-close");
  SubscribeOptions options;
  options.max_in_flight = 100;
  auto sub = client.subscribe_batch(topic, options, BatchOptions{50, std::chrono::minutes(10)},
                                    [&](Batch& b) {
                                      for (Message& m : b) got.add(std::string(m.payload()));
                                    });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(client.publish_sync(topic, "p" + std::to_string(i)) == std::error_code{});
  REQUIRE(wait_for_metrics(client, topic, [](const auto& s) { return s.received >= 3; }));
  CHECK(got.order().empty());  // neither full nor due
  CHECK(client.close_sync(10s) == std::error_code{});
  CHECK(got.wait_for_distinct(3, 1ms));  // handled by the close, before it completed
}

CONTRACT_CASE(middleware_runs_outermost_first_around_every_handler) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  std::mutex mutex;
  std::vector<std::string> trace;
  Collector got;
  auto client = env.connect();
  auto topic = unique_name("middleware");
  auto step = [&](std::string name) -> Middleware {
    return [&, name](Message& m, const MessageHandler& next) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        trace.push_back(name + ">");
      }
      if (m.payload() == "filtered" && name == "inner") {  // answered here: no handler
        if (client.capabilities().ack) m.ack();
        got.add("filtered-by-middleware");
        return;
      }
      next(m);
      std::lock_guard<std::mutex> lock(mutex);
      trace.push_back("<" + name);
    };
  };
  SubscribeOptions options;
  options.concurrency = 1;
  options.middleware = {step("outer"), step("inner")};
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      trace.push_back("handler");
    }
    got.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "one") == std::error_code{});
  REQUIRE(got.wait_for_distinct(1));
  REQUIRE(client.publish_sync(topic, "filtered") == std::error_code{});
  REQUIRE(got.wait_for_distinct(2));
  CHECK(got.count("one") == 1);
  CHECK(got.count("filtered") == 0);
  CHECK(got.count("filtered-by-middleware") == 1);
  CHECK(client.close_sync(5s) == std::error_code{});
  std::lock_guard<std::mutex> lock(mutex);
  const std::vector<std::string> want{"outer>", "inner>", "handler", "<inner",
                                      "<outer", "outer>", "inner>"};
  CHECK(std::vector<std::string>(trace.begin(),
                                 trace.begin() + std::min(trace.size(), want.size())) == want);
}

CONTRACT_CASE(middleware_timeout_gives_a_stuck_message_back_and_counts_the_late_return) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && env.caps.ack);
  Latch release, attempts_seen;
  std::atomic<std::uint32_t> second_attempt{0};
  std::atomic<int> calls{0};
  auto client = env.connect({{"requeue_delay", "20ms"}, {"max_requeue_delay", "100ms"}});
  auto topic = unique_name("mw-timeout");
  SubscribeOptions options;
  options.concurrency = 2;
  options.middleware = {middleware::timeout(100ms)};
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    if (++calls == 1) {
      release.wait_for(1);  // stuck until the test has seen the redelivery
    } else {
      second_attempt = m.attempts();
      attempts_seen.count_down();
    }
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "slow") == std::error_code{});
  REQUIRE(attempts_seen.wait_for(1));
  CHECK(second_attempt >= 2);
  release.count_down();
  CHECK(wait_for_metrics(client, topic, [](const auto& s) {
    return s.handler_timeouts == 1 && s.handler_late_returns == 1;
  }));
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(middleware_deduplicate_acks_a_repeated_idempotency_key_without_the_handler) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Collector got;
  auto client = env.connect({{"envelope", "cloudevents"}});
  auto topic = unique_name("mw-dedup");
  SubscribeOptions options;
  options.concurrency = 1;
  options.middleware = {middleware::deduplicate({100})};
  auto sub =
      client.subscribe(topic, options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (const char* key : {"order-1", "order-1", "order-2"})
    REQUIRE(client.publish_sync(topic, std::string("for ") + key) == std::error_code{});
  for (const char* key : {"order-1", "order-1", "order-2"}) {
    PublishOptions publish;
    publish.headers.set("idempotencykey", key);
    REQUIRE(client.publish_sync(topic, std::string("keyed ") + key, publish) == std::error_code{});
  }
  // Three unkeyed (each its own id, all handled) and three keyed (one of them a repeat).
  CHECK(wait_for_metrics(client, topic, [](const auto& s) {
    return s.received == 6 && s.deduplicated_messages == 1;
  }));
  CHECK(got.wait_for_count(5));
  CHECK(got.count("keyed order-1") == 1);
  CHECK(got.count("keyed order-2") == 1);
  CHECK(got.count("for order-1") == 2);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(middleware_circuit_breaker_opens_after_consecutive_failures_and_closes_on_success) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && env.caps.ack);
  Collector got;
  std::atomic<bool> failing{true};
  auto client = env.connect({{"requeue_delay", "20ms"}, {"max_requeue_delay", "100ms"}});
  auto topic = unique_name("mw-breaker");
  SubscribeOptions options;
  options.concurrency = 1;
  options.middleware = {middleware::circuit_breaker({2, 200ms})};
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    if (failing.load()) throw std::runtime_error("downstream unavailable");
    got.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(client.publish_sync(topic, "b" + std::to_string(i)) == std::error_code{});
  REQUIRE(wait_for_metrics(client, topic, [](const auto& s) { return s.circuit_opened >= 1; }));
  failing = false;
  REQUIRE(got.wait_for_distinct(3));
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(middleware_throttle_spaces_messages_out) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Collector got;
  auto client = env.connect();
  auto topic = unique_name("mw-throttle");
  SubscribeOptions options;
  options.concurrency = 1;
  options.middleware = {middleware::throttle(20)};
  auto sub =
      client.subscribe(topic, options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 5; ++i) client.publish(topic, "r" + std::to_string(i), nullptr);
  REQUIRE(got.wait_for_distinct(5));
  // Five within a burst at 20 a second: the later ones waited for their turn.
  CHECK(metrics_of(client, topic).throttled_messages >= 1);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(middleware_runs_around_serve_handlers) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  std::atomic<int> seen{0};
  auto client = env.connect();
  auto topic = unique_name("mw-serve");
  SubscribeOptions options;
  options.middleware = {[&](Message& m, const MessageHandler& next) {
    ++seen;
    if (m.payload() == "refuse") throw std::runtime_error("refused by middleware");
    next(m);
  }};
  auto srv =
      client.serve(topic, options, [](Message& m) { return "re:" + std::string(m.payload()); });
  REQUIRE(srv.wait_ready(test::kWaitBound) == std::error_code{});
  auto reply = client.request_sync(topic, "ping", 10s);
  REQUIRE(reply.ec == std::error_code{});
  CHECK(reply.payload == "re:ping");
  // Where replies carry no error, the requester only sees no reply.
  auto refused = client.request_sync(topic, "refuse", env.caps.reply_errors ? 10s : 500ms);
  CHECK(refused.ec);
  if (env.caps.reply_errors) {
    CHECK(refused.ec == make_error_code(errc::handler_failed));
    CHECK(refused.detail.find("refused by middleware") != std::string::npos);
  }
  CHECK(seen == 2);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(flush_completes_once_every_earlier_publish_has) {
  CONTRACT_REQUIRES(env.caps.publish);
  std::atomic<int> completed{0};
  auto client = env.connect();
  auto topic = unique_name("flush");
  constexpr int kPublishes = 500;
  for (int i = 0; i < kPublishes; ++i)
    client.publish(topic, "f" + std::to_string(i), [&](const Status&) { ++completed; });
  REQUIRE(client.flush_sync(10s) == std::error_code{});
  CHECK(completed == kPublishes);
  // Nothing pending: at once.
  CHECK(client.flush_sync(10s) == std::error_code{});
  CHECK(client.close_sync(5s) == std::error_code{});
}
