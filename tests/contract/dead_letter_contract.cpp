// SPDX-License-Identifier: Apache-2.0
// Dead-letter topics over every scheme that can subscribe: a message whose handler keeps failing
// ends on the dead-letter topic and only then is acknowledged; nothing is lost on the way, not
// across a broker restart, not while the dead-letter publish fails.
#include <mutex>
#include <set>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

// Fast retries; the envelope carries the dead letter's headers.
const Options kOptions{
    {"envelope", "cloudevents"}, {"requeue_delay", "20ms"}, {"max_requeue_delay", "100ms"}};

SubscribeOptions durable_where_possible(const Capabilities& caps) {
  SubscribeOptions options;
  // A group the broker keeps across its restart (NSQ: a channel that is not ephemeral).
  if (caps.consumer_groups) options.group = "workers";
  return options;
}

}  // namespace

CONTRACT_CASE(a_message_that_keeps_failing_goes_to_the_dead_letter_topic_across_a_broker_restart) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  // Every test broker keeps what it queued across restart() (mem:// too, though its real use
  // is in one process); where the broker cannot redeliver, the client keeps the message.
  Received letters;
  Latch first_attempt, restarted;
  std::atomic<int> attempts{0};
  std::atomic<int> ok_handled{0};
  test::StateRecorder states;
  ConnectOptions connect_options;
  connect_options.options = kOptions;
  connect_options.on_state = states.callback();
  auto client = polybus::connect(env.url, connect_options);
  auto topic = unique_name("poison");
  auto dead = topic + "-dlq";
  auto dlq =
      client.subscribe(dead, durable_where_possible(env.caps), [&](Message& m) { letters.add(m); });
  REQUIRE(dlq.wait_ready(test::kWaitBound) == std::error_code{});
  SubscribeOptions options = durable_where_possible(env.caps);
  options.max_attempts = 3;
  options.dead_letter.topic = dead;
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    if (m.payload() == "fine") {
      ++ok_handled;
      return;
    }
    if (++attempts == 1) {
      first_attempt.count_down();
      restarted.wait_for(1);  // the broker restarts between this attempt and the next
    }
    throw std::runtime_error("cannot parse order " + std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  PublishOptions publish;
  publish.headers.set("correlationid", "order-9");
  REQUIRE(client.publish_sync(topic, "order-9", publish) == std::error_code{});
  REQUIRE(first_attempt.wait_for(1));
  const std::size_t before_restart = states.events().size();
  env.broker->restart();
  // Back (and subscribed again) before the next attempt: a broker that keeps nothing for a
  // subscriber that is not there yet would otherwise drop the dead letter it is sent.
  const auto dropped = states.wait_for(
      [](const StateEvent& e) {
        return e.state == ConnectionState::disconnected || e.state == ConnectionState::reconnecting;
      },
      before_restart);
  REQUIRE(dropped);
  REQUIRE(states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::connected; },
                          *dropped + 1));
  restarted.count_down();
  REQUIRE(letters.arrived.wait_for(1));
  auto [payload, headers] = letters.at(0);
  CHECK(payload == "order-9");
  CHECK(headers.get("correlationid") == "order-9");
  CHECK(headers.get("deadlettertopic") == topic);
  CHECK(headers.get("deadletterattempts").has_value());
  auto reason = std::string(headers.get("deadletterreason").value_or(""));
  // The handler's words, or the count when the broker handed it over once too often.
  CHECK((reason.find("cannot parse order order-9") != std::string::npos ||
         reason.find("max_attempts=3") != std::string::npos));
  CHECK(attempts.load() >= 3);
  // Acknowledged after the dead letter went out: the subscription goes on with the next one and
  // the poison message is not handed over again.
  const int attempts_at_dead_letter = attempts.load();
  REQUIRE(test::eventually([&] {
    if (ok_handled.load() > 0) return true;
    client.publish(topic, "fine", nullptr);
    return test::eventually([&] { return ok_handled.load() > 0; }, 2s);
  }));
  CHECK(attempts.load() == attempts_at_dead_letter);
  CHECK(client.stats().dead_lettered >= 1);
  const auto metrics = client.metrics();
  bool counted = false;
  for (const auto& s : metrics.subscriptions)
    if (s.topic == topic && s.dead_lettered >= 1) counted = true;
  CHECK(counted);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_failed_dead_letter_publish_leaves_the_message_unacknowledged_until_one_succeeds) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  // The dead-letter topic lives on a second broker, down at first: its publishes fail.
  auto second = start_broker(env.name);
  if (!second) return;
  Received letters;
  std::atomic<int> attempts{0};
  Latch dead_letter_failed;
  ConnectOptions dlq_options;
  dlq_options.options = kOptions;
  dlq_options.options.set("op_timeout", "300ms");
  Client dlq_client = polybus::connect(second->url(), dlq_options);
  // The dead letters' reader: the publishing client itself, subscribed before its broker stops.
  // It subscribes again when it reconnects, ahead of the publish it then retries.
  auto dead = unique_name("poison-down") + "-dlq";
  auto dlq = dlq_client.subscribe(dead, durable_where_possible(env.caps),
                                  [&](Message& m) { letters.add(m); });
  REQUIRE(dlq.wait_ready(test::kWaitBound) == std::error_code{});
  second->stop();
  ConnectOptions options_with_errors;
  options_with_errors.options = kOptions;
  options_with_errors.on_error = [&](std::error_code, const std::string& text) {
    if (text.find("dead-letter topic") != std::string::npos) dead_letter_failed.count_down();
  };
  auto client = polybus::connect(env.url, options_with_errors);
  auto topic = unique_name("poison-down");
  SubscribeOptions options;
  options.max_attempts = 2;
  options.dead_letter = {dead, dlq_client};
  auto sub = client.subscribe(topic, options, [&](Message&) {
    ++attempts;
    throw std::runtime_error("always fails");
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "keep-me") == std::error_code{});
  REQUIRE(dead_letter_failed.wait_for(2));  // failed twice, and is still around
  second->start();
  REQUIRE(letters.arrived.wait_for(1));
  auto [payload, headers] = letters.at(0);
  CHECK(payload == "keep-me");
  CHECK(headers.get("deadlettertopic") == topic);
  CHECK(client.close_sync(5s) == std::error_code{});
  CHECK(dlq_client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(messages_waiting_for_an_in_place_retry_are_bounded_by_the_held_budget) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && !env.caps.ack);
  // Retries an hour away: whatever waits for one waits for the whole case.
  std::mutex mutex;
  std::vector<std::string> discarded;
  ConnectOptions options;
  options.options =
      Options{{"requeue_delay", "1h"}, {"max_requeue_delay", "1h"}, {"max_held_messages", "4"}};
  std::atomic<int> attempts{0};
  auto client = polybus::connect(env.url, options);
  auto topic = unique_name("held-retries");
  SubscribeOptions subscribe;
  subscribe.max_attempts = 3;
  subscribe.on_discard = [&](const Message& m) {
    std::lock_guard<std::mutex> lock(mutex);
    discarded.emplace_back(m.payload());
  };
  auto sub = client.subscribe(topic, subscribe, [&](Message&) {
    ++attempts;
    throw std::runtime_error("always fails");
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  auto held = [&] {
    for (const auto& s : client.metrics().subscriptions)
      if (s.topic == topic) return s.held_messages;
    return std::uint64_t{0};
  };
  // Each fails once, then waits for its retry: held, though no handler has it.
  for (int i = 0; i < 3; ++i)
    REQUIRE(client.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(test::eventually([&] { return held() == 3 && attempts.load() == 3; }));
  // Five more: one fills the retry budget, four find no room and are given up at once (to
  // on_discard, counted), while delivery and publishing go on.
  for (int i = 3; i < 8; ++i)
    REQUIRE(client.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  // The counter moves before on_discard runs, and a message is held after its handler throws:
  // wait for all of them, not the first.
  auto discards_seen = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return discarded.size();
  };
  REQUIRE(test::eventually([&] {
    return client.stats().discarded == 4 && attempts.load() == 8 && discards_seen() == 4 &&
           held() == 4;
  }));
  {
    std::lock_guard<std::mutex> lock(mutex);
    // Four of the last five, whichever came last: not every scheme keeps the order (QuickIO
    // over HTTP long polling).
    std::set<std::string> given_up(discarded.begin(), discarded.end());
    CHECK(discarded.size() == 4);
    CHECK(given_up.size() == 4);
    for (const auto& payload : given_up)
      CHECK((payload >= "m3" && payload <= "m7" && payload.size() == 2));
  }
  // A close waits for retries within its deadline, then says what it cut off.
  const Status closed = client.close_sync(300ms);
  CHECK(closed.code() == make_error_code(errc::timeout));
  CHECK_THAT(closed.cause(), Catch::Contains("message(s) still being handled or waiting"));
}

CONTRACT_CASE(a_foreign_envelope_s_headers_that_cannot_travel_do_not_hold_back_its_dead_letter) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  // Another client's envelope with an attribute name CloudEvents does not allow: readable, but
  // not one polybus may send on. The dead letter goes without it, not never.
  Received letters;
  auto plain = env.connect();
  auto client = env.connect(kOptions);
  auto topic = unique_name("foreign-poison");
  auto dead = topic + "-dlq";
  auto dlq =
      client.subscribe(dead, durable_where_possible(env.caps), [&](Message& m) { letters.add(m); });
  REQUIRE(dlq.wait_ready(test::kWaitBound) == std::error_code{});
  SubscribeOptions options;
  options.max_attempts = 1;
  options.dead_letter.topic = dead;
  auto sub = client.subscribe(topic, options,
                              [](Message&) { throw std::runtime_error("cannot handle it"); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(plain.publish_sync(topic, R"({"specversion":"1.0","id":"f-1","source":"/other",)"
                                    R"("type":"t","Bad-Name":"x","data":"payload"})") ==
          std::error_code{});
  REQUIRE(letters.arrived.wait_for(1));
  auto [payload, headers] = letters.at(0);
  CHECK(payload == "payload");
  CHECK(headers.get("id") == "f-1");
  CHECK_FALSE(headers.contains("Bad-Name"));
  CHECK_THAT(std::string(headers.get("deadletterreason").value_or("")),
             Catch::Contains("cannot handle it"));
}
