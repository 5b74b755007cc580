// SPDX-License-Identifier: Apache-2.0
// Capability flags and behaviour agree, for every flag. Each flag names the contract cases that
// show it where a scheme claims it (cases gated on it with CONTRACT_REQUIRES), and either a
// probe that shows the scheme refuses it where it does not, or why its absence cannot be refused
// (a promise not made, such as ordering). A flag without an entry here fails every run, so a new
// flag cannot go unchecked, and a wrong flag either runs a case that fails or skips a probe that
// would have caught it.
#include <functional>
#include <thread>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

// What a handler saw when it called each response on a delivered message.
struct ResponsesSeen {
  std::error_code ack, nack, nack_with_delay, touch;
};

// Delivers one message and calls the responses a scheme without `ack` must refuse. Only for
// schemes that can both publish and subscribe; for the others, deliveries are refused first.
ResponsesSeen respond_to_one_delivery(const Env& env) {
  ResponsesSeen seen;
  Latch handled;
  auto client = env.connect();
  auto topic = unique_name("responses");
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    m.take_manual_control();
    seen.touch = m.touch();
    seen.nack_with_delay = m.nack(std::chrono::milliseconds(100));
    seen.nack = m.nack(std::chrono::milliseconds(0));
    seen.ack = m.ack();
    handled.count_down();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "probe") == std::error_code{});
  REQUIRE(handled.wait_for(1));
  return seen;
}

struct FlagCheck {
  const char* flag;
  // The cases that show the flag where it is claimed (at least one).
  std::vector<const char*> claimed_in;
  // Shows the scheme refuses what it does not claim; empty when absence is checked in the cases
  // above (refusal_in_claimed_cases) or cannot be refused (absence_is_a_promise_not_made).
  std::function<void(const Env&)> refused;
  const char* why_no_probe = "";
};

constexpr const char* refusal_in_claimed_cases = "the same cases check the other side";
constexpr const char* absence_is_a_promise_not_made = "nothing to refuse: a promise not made";

void expect_not_supported_thrown(const std::function<void()>& call) {
  try {
    call();
    FAIL("accepted, where the scheme does not claim it");
  } catch (const Error& e) {
    CHECK(e.code() == errc::not_supported);
  }
}

const std::vector<FlagCheck>& flag_checks() {
  static const std::vector<FlagCheck> checks = {
      {"publish",
       {"published_messages_reach_a_subscriber"},
       [](const Env& env) {
         auto client = env.connect();
         CHECK(client.publish_sync("t", "a") == errc::not_supported);
       }},
      {"subscribe",
       {"published_messages_reach_a_subscriber"},
       [](const Env& env) {
         auto client = env.connect();
         expect_not_supported_thrown([&] { client.subscribe("t", {}, [](Message&) {}); });
       }},
      {"ack",
       {"a_nacked_message_is_redelivered", "a_handler_that_throws_gets_its_message_again"},
       [](const Env& env) {
         if (!env.caps.publish || !env.caps.subscribe) return;  // no deliveries to respond to
         auto seen = respond_to_one_delivery(env);
         CHECK(seen.ack == errc::not_supported);
         CHECK(seen.nack == errc::not_supported);
       }},
      {"nack_with_delay",
       {"a_nack_with_a_delay_is_redelivered_no_sooner"},
       [](const Env& env) {
         if (!env.caps.publish || !env.caps.subscribe) return;
         CHECK(respond_to_one_delivery(env).nack_with_delay == errc::not_supported);
       }},
      {"touch",
       {"touch_keeps_a_slow_message_from_being_redelivered"},
       [](const Env& env) {
         if (!env.caps.publish || !env.caps.subscribe) return;
         CHECK(respond_to_one_delivery(env).touch == errc::not_supported);
       }},
      {"redelivery_on_timeout",
       {"a_message_never_acked_is_redelivered_after_its_timeout"},
       {},
       absence_is_a_promise_not_made},
      {"replay_from_offset",
       {"a_subscription_replays_from_an_offset"},
       [](const Env& env) {
         if (!env.caps.subscribe) return;  // subscribe itself is refused (checked above)
         auto client = env.connect();
         SubscribeOptions options;
         options.from_offset = 0;
         expect_not_supported_thrown([&] { client.subscribe("t", options, [](Message&) {}); });
       }},
      {"request_reply",
       {"request_gets_the_reply_from_serve"},
       [](const Env& env) {
         auto client = env.connect();
         CHECK(client.request_sync("t", "a", 1s).ec == errc::not_supported);
         expect_not_supported_thrown(
             [&] { client.serve("t", [](Message&) { return std::string(); }); });
       }},
      {"reply_errors",
       {"a_failing_handler_reaches_the_requester_as_handler_failed_with_its_words",
        "a_serve_handler_that_throws_fails_the_request"},
       {},
       refusal_in_claimed_cases},
      {"ordered_delivery",
       {"messages_arrive_in_publish_order_where_ordering_is_claimed"},
       {},
       absence_is_a_promise_not_made},
      {"consumer_groups",
       {"consumer_groups_share_messages_and_each_group_gets_all"},
       [](const Env& env) {
         if (!env.caps.subscribe) return;
         auto client = env.connect();
         SubscribeOptions options;
         options.group = "g";
         expect_not_supported_thrown([&] { client.subscribe("t", options, [](Message&) {}); });
       }},
      {"batch_publish",
       {"batch_and_deferred_publish_deliver_where_supported"},
       [](const Env& env) {
         auto client = env.connect();
         Latch done;
         std::error_code result;
         client.publish_batch("t", {"a", "b"}, [&](std::error_code ec) {
           result = ec;
           done.count_down();
         });
         REQUIRE(done.wait_for(1));
         CHECK(result == errc::not_supported);
       }},
      {"deferred_publish",
       {"batch_and_deferred_publish_deliver_where_supported"},
       [](const Env& env) {
         auto client = env.connect();
         PublishOptions options;
         options.defer = 100ms;
         CHECK(client.publish_sync("t", "a", options) == errc::not_supported);
       }},
      {"durable",
       {"a_durable_broker_keeps_queued_messages_across_its_restart"},
       {},
       absence_is_a_promise_not_made},
      {"publish_confirmed",
       {"a_publish_while_the_broker_is_down_fails_at_its_deadline_naming_the_cause"},
       {},
       refusal_in_claimed_cases},
      {"reconnect_policy",
       {"reconnects_follow_the_reconnect_policy_or_the_connect_refuses_it"},
       {},
       refusal_in_claimed_cases},
  };
  return checks;
}

}  // namespace

CONTRACT_REQUEST_CASE(every_capability_flag_is_checked_where_claimed_and_refused_where_not) {
  const auto& checks = flag_checks();
  const auto& titles = case_titles();
  for (const auto& [flag, claimed] : env.caps.list()) {
    INFO("capability " << flag << (claimed ? " (claimed)" : " (not claimed)"));
    auto check = std::find_if(checks.begin(), checks.end(),
                              [&](const FlagCheck& c) { return std::string(c.flag) == flag; });
    REQUIRE(check != checks.end());  // a new flag needs an entry in flag_checks()
    REQUIRE_FALSE(check->claimed_in.empty());
    for (const char* title : check->claimed_in)
      CHECK(std::find(titles.begin(), titles.end(), title) != titles.end());
    REQUIRE((check->refused || *check->why_no_probe));
    if (!claimed && check->refused) check->refused(env);
  }
  CHECK(checks.size() == env.caps.list().size());
}

CONTRACT_CASE(a_nack_with_a_delay_is_redelivered_no_sooner) {
  CONTRACT_REQUIRES(env.caps.nack_with_delay && env.caps.publish);
  // Declared before the clients: handlers may still run while the clients close.
  Latch second;
  std::atomic<int> deliveries{0};
  std::atomic<bool> nack_refused{false};
  std::chrono::steady_clock::time_point nacked_at, redelivered_at;
  auto client = env.connect();
  auto topic = unique_name("nackdelay");
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    if (++deliveries == 1) {
      nacked_at = std::chrono::steady_clock::now();
      if (m.nack(300ms)) nack_refused = true;
    } else if (deliveries == 2) {
      redelivered_at = std::chrono::steady_clock::now();
      second.count_down();
    }
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "later") == std::error_code{});
  REQUIRE(second.wait_for(1));
  CHECK_FALSE(nack_refused.load());
  // The broker holds it for the delay: a lower bound, never a timing assertion from above.
  CHECK(redelivered_at - nacked_at >= 300ms);
}

CONTRACT_CASE(a_durable_broker_keeps_queued_messages_across_its_restart) {
  CONTRACT_REQUIRES(env.caps.durable && env.caps.consumer_groups && env.caps.publish);
  constexpr int kCount = 50;
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  auto topic = unique_name("durable");
  SubscribeOptions options;
  options.group = "kept";
  {
    // The group exists before anything is published, so the broker queues for it.
    auto client = env.connect();
    auto sub = client.subscribe(topic, options, [](Message&) {});
    REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
    REQUIRE(sub.unsubscribe_sync(test::kWaitBound) == std::error_code{});
    for (int i = 0; i < kCount; ++i)
      REQUIRE(client.publish_sync(topic, "kept" + std::to_string(i)) == std::error_code{});
    REQUIRE(client.close_sync(test::kWaitBound) == std::error_code{});
  }
  env.broker->restart();
  auto client = env.connect();
  auto sub =
      client.subscribe(topic, options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(got.wait_for_distinct(kCount));
}
