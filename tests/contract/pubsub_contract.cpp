// SPDX-License-Identifier: Apache-2.0
// Publish/subscribe behaviour every adapter must show.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

Subscription subscribe_collecting(Client& client, const std::string& topic, Collector& into,
                                  SubscribeOptions options = {}) {
  auto sub = client.subscribe(topic, std::move(options),
                              [&into](Message& m) { into.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  return sub;
}

bool has_warm_up(const std::map<std::string, int>& seen) {
  auto it = seen.lower_bound("warm-");
  return it != seen.end() && it->first.rfind("warm-", 0) == 0;
}

// Publishes "warm-N" until every collector received one. A ready subscription may not receive
// yet: through nsqlookupd it is confirmed while no nsqd has the topic, and its channel, made when
// it connects later, does not get what other channels were given before.
void publish_until_received(Client& client, const std::string& topic,
                            std::initializer_list<Collector*> collectors) {
  const auto give_up = std::chrono::steady_clock::now() + test::kWaitBound;
  for (int n = 0;; ++n) {
    REQUIRE(client.publish_sync(topic, "warm-" + std::to_string(n)) == std::error_code{});
    bool all = true;
    for (auto* c : collectors) all = all && c->wait_until(has_warm_up, 200ms);
    if (all) return;
    REQUIRE(std::chrono::steady_clock::now() < give_up);
  }
}

}  // namespace

CONTRACT_CASE(published_messages_reach_a_subscriber) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  auto client = env.connect();
  auto topic = unique_name("basic");
  auto sub = subscribe_collecting(client, topic, got);
  for (int i = 0; i < 10; ++i)
    REQUIRE(client.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(got.wait_for_distinct(10));
  for (int i = 0; i < 10; ++i) CHECK(got.count("m" + std::to_string(i)) >= 1);
  CHECK(client.stats().publish_acked == 10);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_subscriber_receives_5000_messages_published_concurrently) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Latch published;
  constexpr int kPublishers = 4, kEach = 1250;
  std::atomic<int> failures{0};
  auto client = env.connect();
  auto topic = unique_name("many");
  SubscribeOptions options;
  options.max_in_flight = 200;
  options.concurrency = 4;
  auto sub = subscribe_collecting(client, topic, got, options);
  std::vector<std::thread> publishers;
  for (int p = 0; p < kPublishers; ++p) {
    publishers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i)
        client.publish(topic, std::to_string(p) + "-" + std::to_string(i), [&](std::error_code ec) {
          if (ec) ++failures;
          published.count_down();
        });
    });
  }
  for (auto& t : publishers) t.join();
  REQUIRE(published.wait_for(kPublishers * kEach));
  CHECK(failures == 0);
  REQUIRE(got.wait_for_distinct(kPublishers * kEach));
  CHECK(client.close_sync(10s) == std::error_code{});
}

CONTRACT_CASE(several_topics_at_once_are_kept_apart) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  std::vector<std::unique_ptr<Collector>> got;
  auto client = env.connect();
  std::vector<std::string> topics{unique_name("ta"), unique_name("tb"), unique_name("tc")};
  std::vector<Subscription> subs;
  for (auto& t : topics) {
    got.push_back(std::make_unique<Collector>());
    subs.push_back(subscribe_collecting(client, t, *got.back()));
  }
  for (int i = 0; i < 20; ++i)
    for (std::size_t t = 0; t < topics.size(); ++t)
      client.publish(topics[t], topics[t] + "/" + std::to_string(i), nullptr);
  for (std::size_t t = 0; t < topics.size(); ++t) {
    REQUIRE(got[t]->wait_for_distinct(20));
    for (auto& payload : got[t]->order()) CHECK(payload.rfind(topics[t] + "/", 0) == 0);
  }
}

CONTRACT_CASE(a_nacked_message_is_redelivered) {
  CONTRACT_REQUIRES(env.caps.ack);
  // Declared before the clients: handlers may still run while the clients close.
  Latch second;
  std::atomic<int> deliveries{0};
  std::atomic<std::uint32_t> last_attempts{0};
  std::atomic<bool> nack_refused{false};
  auto client = env.connect();
  auto topic = unique_name("nack");
  // Catch2 assertions are not thread-safe: handlers record, the test thread checks.
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    if (++deliveries == 1) {
      if (m.nack(std::chrono::milliseconds(0))) nack_refused = true;
    } else {
      last_attempts = m.attempts();
      second.count_down();
    }
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "again") == std::error_code{});
  REQUIRE(second.wait_for(1));
  CHECK_FALSE(nack_refused.load());
  CHECK(last_attempts.load() == 2);
}

CONTRACT_CASE(a_handler_that_throws_gets_its_message_again) {
  CONTRACT_REQUIRES(env.caps.ack);
  ConnectOptions none;
  // Declared before the clients: handlers may still run while the clients close.
  Latch redelivered;
  std::atomic<int> deliveries{0};
  auto client = env.connect(Options{{"requeue_delay", "0"}});
  auto topic = unique_name("throw");
  auto sub = client.subscribe(topic, {}, [&](Message&) {
    if (++deliveries == 1) throw std::runtime_error("first attempt fails");
    redelivered.count_down();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "x") == std::error_code{});
  REQUIRE(redelivered.wait_for(1));
  CHECK(client.stats().nacked >= 1);
}

CONTRACT_CASE(a_message_never_acked_is_redelivered_after_its_timeout) {
  CONTRACT_REQUIRES(env.caps.redelivery_on_timeout);
  // Declared before the clients: handlers may still run while the clients close.
  Latch redelivered;
  std::atomic<int> deliveries{0};
  Message abandoned;
  auto client = env.connect();
  auto topic = unique_name("timeout");
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    if (++deliveries == 1) {
      m.take_manual_control();  // and no response until it came again
      abandoned = m;
    } else {
      redelivered.count_down();
    }
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "slow") == std::error_code{});
  REQUIRE(redelivered.wait_for(1));
  // Answered late, so that close does not wait out close_timeout for it: the broker has moved
  // on (NSQ reports E_FIN_FAILED as an error event), and the client must still close cleanly.
  (void)abandoned.ack();
  CHECK(client.close_sync(test::kWaitBound) == std::error_code{});
}

CONTRACT_CASE(touch_keeps_a_slow_message_from_being_redelivered) {
  CONTRACT_REQUIRES(env.caps.touch && env.caps.redelivery_on_timeout);
  // Declared before the clients: handlers may still run while the clients close.
  Latch handled;
  std::atomic<int> deliveries{0}, refused{0};
  auto client = env.connect();
  auto topic = unique_name("touch");
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    ++deliveries;
    m.take_manual_control();
    // Hold the message for about three message timeouts' worth of touches, then ack. The
    // touches are what keep it; the count of deliveries is what the test checks.
    for (int i = 0; i < 12; ++i) {
      if (m.touch()) ++refused;
      std::this_thread::sleep_for(100ms);  // simulated work, not synchronisation
    }
    if (m.ack()) ++refused;
    handled.count_down();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "slow") == std::error_code{});
  REQUIRE(handled.wait_for(1));
  CHECK(client.close_sync(5s) == std::error_code{});
  CHECK(refused == 0);
  CHECK(deliveries == 1);
}

CONTRACT_CASE(a_new_subscription_continues_after_another_closes) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.consumer_groups);
  // Declared before the clients: handlers may still run while the clients close.
  Collector first;
  Collector second;
  auto client = env.connect();
  auto topic = unique_name("continue");
  SubscribeOptions options;
  options.group = "workers";
  auto sub1 = subscribe_collecting(client, topic, first, options);
  for (int i = 0; i < 5; ++i)
    REQUIRE(client.publish_sync(topic, "a" + std::to_string(i)) == std::error_code{});
  REQUIRE(first.wait_for_distinct(5));
  REQUIRE(sub1.unsubscribe_sync(5s) == std::error_code{});
  for (int i = 0; i < 5; ++i)
    REQUIRE(client.publish_sync(topic, "b" + std::to_string(i)) == std::error_code{});
  auto sub2 = subscribe_collecting(client, topic, second, options);
  // Every b reaches the new member. An "a" may come too: the last one's ack can still be on its
  // way when the first member leaves, and the broker then redelivers it (at least once).
  REQUIRE(second.wait_until([](const auto& seen) {
    for (int i = 0; i < 5; ++i)
      if (!seen.count("b" + std::to_string(i))) return false;
    return true;
  }));
  for (int i = 0; i < 5; ++i) CHECK(second.count("b" + std::to_string(i)) == 1);
}

CONTRACT_CASE(unsubscribe_stops_delivery) {
  CONTRACT_REQUIRES(env.caps.subscribe);
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Collector witness;
  auto client = env.connect();
  auto topic = unique_name("unsub");
  auto sub = subscribe_collecting(client, topic, got);
  REQUIRE(client.publish_sync(topic, "before") == std::error_code{});
  REQUIRE(got.wait_for_count(1));
  REQUIRE(sub.unsubscribe_sync(5s) == std::error_code{});
  CHECK_FALSE(sub.active());
  // A second subscriber on the same topic proves the later message was published and delivered.
  auto sub2 = subscribe_collecting(client, topic, witness);
  REQUIRE(client.publish_sync(topic, "after") == std::error_code{});
  REQUIRE(witness.wait_for_count(1));
  CHECK(got.count("after") == 0);
}

CONTRACT_CASE(messages_arrive_in_publish_order_where_ordering_is_claimed) {
  CONTRACT_REQUIRES(env.caps.ordered_delivery);
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Latch published;
  constexpr int kCount = 1000;
  auto client = env.connect();
  auto topic = unique_name("order");
  SubscribeOptions options;
  options.max_in_flight = 50;
  options.concurrency = 1;
  auto sub = subscribe_collecting(client, topic, got, options);
  for (int i = 0; i < kCount; ++i)
    client.publish(topic, std::to_string(i), [&](std::error_code) { published.count_down(); });
  REQUIRE(published.wait_for(kCount));
  REQUIRE(got.wait_for_count(kCount));
  auto order = got.order();
  for (int i = 0; i < kCount; ++i) REQUIRE(order[i] == std::to_string(i));
}

CONTRACT_CASE(pause_holds_delivery_until_resume) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Collector witness;
  auto client = env.connect();
  auto topic = unique_name("pause");
  auto sub = subscribe_collecting(client, topic, got);
  // The witness has its own client: some protocols allow one subscription per topic per client.
  auto other = env.connect();
  auto sub2 = subscribe_collecting(other, topic, witness);
  publish_until_received(client, topic, {&got, &witness});
  sub.pause();
  // Both publishes complete after the pause took effect: the client applies operations in order.
  REQUIRE(client.publish_sync(topic, "held") == std::error_code{});
  REQUIRE(client.publish_sync(topic, "held2") == std::error_code{});
  REQUIRE(witness.wait_until([](const auto& seen) { return seen.count("held2") > 0; }));
  CHECK(got.count("held") == 0);
  CHECK(got.count("held2") == 0);
  sub.resume();
  REQUIRE(got.wait_until(
      [](const auto& seen) { return seen.count("held") > 0 && seen.count("held2") > 0; }));
}

CONTRACT_CASE(consumer_groups_share_messages_and_each_group_gets_all) {
  CONTRACT_REQUIRES(env.caps.consumer_groups);
  // Declared before the clients: handlers may still run while the clients close.
  Collector group1, group2_got;
  Collector warm1, warm2, warm3;  // each subscription's warm-up messages
  Latch published;
  constexpr int kCount = 200;
  std::atomic<int> member1{0}, member2{0};
  Latch first1, first2;  // see `member` below
  auto client_a = env.connect();
  auto client_b = env.connect();
  auto topic = unique_name("groups");
  SubscribeOptions g1;
  g1.group = "g1";
  g1.max_in_flight = 1;
  SubscribeOptions g2;
  g2.group = "g2";
  // Each member holds its first message until the other has one: with one in flight each, the
  // broker must give the other member the next ones meanwhile. Without the hold, a member whose
  // handler thread a loaded machine did not run soon enough could see none of the 200.
  auto member = [&group1](std::atomic<int>& count, Collector& warm, Latch& mine, Latch& other) {
    return [&group1, &count, &warm, &mine, &other](Message& m) {
      std::string payload(m.payload());
      if (payload.rfind("warm-", 0) == 0) return warm.add(std::move(payload));
      if (++count == 1) {
        mine.count_down();
        other.wait_for(1);  // bounded: a broker that never shares fails the checks below
      }
      group1.add(std::move(payload));
    };
  };
  auto s1 = client_a.subscribe(topic, g1, member(member1, warm1, first1, first2));
  auto s2 = client_b.subscribe(topic, g1, member(member2, warm2, first2, first1));
  auto s3 = client_a.subscribe(topic, g2, [&](Message& m) {
    std::string payload(m.payload());
    (payload.rfind("warm-", 0) == 0 ? warm3 : group2_got).add(std::move(payload));
  });
  for (auto* s : {&s1, &s2, &s3}) REQUIRE(s->wait_ready(test::kWaitBound) == std::error_code{});
  publish_until_received(client_a, topic, {&warm1, &warm2, &warm3});
  for (int i = 0; i < kCount; ++i)
    client_a.publish(topic, std::to_string(i), [&](std::error_code) { published.count_down(); });
  REQUIRE(published.wait_for(kCount));
  REQUIRE(group2_got.wait_for_distinct(kCount));
  REQUIRE(group1.wait_for_distinct(kCount));
  // Shared, not copied: each message went to one member of g1 (giving every member every
  // message would double this), and both took part.
  CHECK(member1 + member2 == kCount);
  CHECK(group1.total() == static_cast<std::size_t>(kCount));
  CHECK(member1 > 0);
  CHECK(member2 > 0);
}

CONTRACT_CASE(a_subscription_replays_from_an_offset) {
  CONTRACT_REQUIRES(env.caps.replay_from_offset);
  // Declared before the clients: handlers may still run while the clients close.
  Collector first;
  Collector replay;
  std::mutex mutex;
  std::map<std::string, std::uint64_t> offsets;
  auto client = env.connect();
  auto topic = unique_name("replay");
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    std::lock_guard<std::mutex> lock(mutex);
    offsets[std::string(m.payload())] = m.offset().value_or(UINT64_MAX);
    first.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 10; ++i)
    REQUIRE(client.publish_sync(topic, "r" + std::to_string(i)) == std::error_code{});
  REQUIRE(first.wait_for_distinct(10));
  // The offset of r4 resumes after it: a subscription from there replays r5..r9.
  SubscribeOptions from;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [payload, offset] : offsets) CHECK(offset != UINT64_MAX);
    from.from_offset = offsets.at("r4");
  }
  auto other = env.connect();  // one subscription per topic per client in some protocols
  auto sub2 = subscribe_collecting(other, topic, replay, from);
  REQUIRE(replay.wait_for_count(5));
  auto order = replay.order();
  for (int i = 0; i < 5; ++i) CHECK(order[i] == "r" + std::to_string(i + 5));
}

CONTRACT_CASE(a_message_over_max_attempts_is_discarded_through_the_callback) {
  CONTRACT_REQUIRES(env.caps.ack);
  // Declared before the clients: handlers may still run while the clients close.
  Latch discarded;
  std::atomic<int> handled{0};
  std::atomic<std::uint32_t> discarded_attempts{0};
  auto client = env.connect(Options{{"requeue_delay", "0"}});
  auto topic = unique_name("attempts");
  SubscribeOptions options;
  options.max_attempts = 3;
  options.on_discard = [&](const Message& m) {
    discarded_attempts = m.attempts();
    discarded.count_down();
  };
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    ++handled;
    m.nack(std::chrono::milliseconds(0));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync(topic, "poison") == std::error_code{});
  REQUIRE(discarded.wait_for(1));
  CHECK(discarded_attempts == 4);
  CHECK(handled == 3);
  CHECK(client.stats().discarded == 1);
}

CONTRACT_CASE(handlers_run_in_parallel_up_to_the_subscription_s_concurrency_and_no_further) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  constexpr int kConcurrency = 3, kMessages = 12;
  // Declared before the clients: handlers may still run while the clients close.
  Latch three_running, fourth_running, all_done;
  std::atomic<int> running{0}, most{0};
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open_gate = false;
  auto client = env.connect();
  auto topic = unique_name("concurrency");
  SubscribeOptions options;
  options.concurrency = kConcurrency;
  options.max_in_flight = kMessages;
  auto sub = client.subscribe(topic, options, [&](Message&) {
    const int now = ++running;
    test::raise_to(most, now);
    if (now <= kConcurrency)
      three_running.count_down();
    else
      fourth_running.count_down();
    {
      std::unique_lock<std::mutex> lock(gate_mutex);
      gate_cv.wait(lock, [&] { return open_gate; });
    }
    --running;
    all_done.count_down();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < kMessages; ++i)
    REQUIRE(client.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  // kConcurrency handlers run at once (not one after another) ...
  const bool parallel = three_running.wait_for(kConcurrency);
  // ... and while they are held, no further one starts (a bound, not a synchronisation).
  const bool exceeded = fourth_running.wait_for(1, 300ms);
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    open_gate = true;
  }
  gate_cv.notify_all();
  CHECK(parallel);
  CHECK_FALSE(exceeded);
  REQUIRE(all_done.wait_for(kMessages));
  CHECK(most.load() == kConcurrency);
}
