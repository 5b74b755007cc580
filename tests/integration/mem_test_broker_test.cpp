// SPDX-License-Identifier: Apache-2.0
// The mem test broker's journal, fault rules and manual clock, through a client of its URL.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>

#include "polybus/mem_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;
using polybus::testing::JournalEntry;

namespace {

// The messages a subscription was handed, in order; the first copy of each is kept unanswered.
struct Deliveries {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> seen;  // "payload#attempt"
  std::vector<Message> held;

  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, kWaitBound, [&] { return seen.size() >= n; });
  }
};

}  // namespace

TEST_CASE("mem test broker: on a manual clock the ack timeout redelivers as the test advances it",
          "[mem][clock]") {
  testing::TestBrokerOptions options;
  options.clock = std::make_shared<polybus::ManualClock>();
  options.journal_capacity = 1000;
  Deliveries got;                                     // outlives the client, whose handlers use it
  auto broker = mem::testing::start_broker(options);  // msg_timeout=500ms in its URL
  auto client = connect(broker->url());
  SubscribeOptions group;
  group.group = "g";
  auto sub = client.subscribe("t", group, [&](Message& m) {
    std::lock_guard<std::mutex> lock(got.mutex);
    if (m.attempts() == 1) {
      m.take_manual_control();
      got.held.push_back(m);
    }
    got.seen.push_back(std::string(m.payload()) + "#" + std::to_string(m.attempts()));
    got.changed.notify_all();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  PublishOptions in_a_minute;
  in_a_minute.defer = std::chrono::minutes(1);
  REQUIRE(client.publish_sync("t", "later", in_a_minute) == std::error_code{});
  REQUIRE(client.publish_sync("t", "now") == std::error_code{});
  REQUIRE(got.wait_for(1));
  options.clock->advance(std::chrono::milliseconds(499));
  const auto deliveries = [&] {
    return broker->journal()
        ->entries([](const JournalEntry& e) { return e.kind == "deliver"; })
        .size();
  };
  CHECK(deliveries() == 1);
  options.clock->advance(std::chrono::milliseconds(1));
  CHECK(deliveries() == 2);  // handed over before advance() returned
  REQUIRE(got.wait_for(2));
  // Its ack in before time moves on, or the second copy would time out too.
  REQUIRE(broker->journal()->wait_for([](const JournalEntry& e) { return e.kind == "ack"; },
                                      kWaitBound));
  // To the deferred publish's minute, and not to its delivery's timeout 500 ms later.
  options.clock->advance(std::chrono::milliseconds(59'500));
  REQUIRE(got.wait_for(3));
  std::lock_guard<std::mutex> lock(got.mutex);
  CHECK(got.seen == std::vector<std::string>{"now#1", "now#2", "later#1"});
  CHECK(got.held.size() == 2);
  for (auto& m : got.held) m.ack();
}

TEST_CASE("mem test broker: the journal and fault rules see each operation of a client",
          "[mem][journal][faults]") {
  testing::TestBrokerOptions options;
  options.journal_capacity = 1000;
  // The second ack fails; the third publish is stored twice; the first delivery of "drop" is
  // swallowed (it stays in flight and times out).
  options.faults.push_back(testing::parse_fault_rule("unit=ack,nth=2,error=E_ACK failed"));
  options.faults.push_back(testing::parse_fault_rule("unit=publish,nth=3,duplicate"));
  Deliveries got;
  auto broker = mem::testing::start_broker(options);
  auto client = connect(broker->url());
  SubscribeOptions group;
  group.group = "g";
  auto sub = client.subscribe("t", group, [&](Message& m) {
    std::lock_guard<std::mutex> lock(got.mutex);
    got.seen.push_back(std::string(m.payload()) + "#" + std::to_string(m.attempts()));
    got.changed.notify_all();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (const char* text : {"a", "b", "c"})
    REQUIRE(client.publish_sync("t", text) == std::error_code{});
  // a, b, c twice; b's ack failed, so b comes again after msg_timeout.
  REQUIRE(got.wait_for(5));
  auto& journal = *broker->journal();
  const auto acks = journal.entries([](const JournalEntry& e) { return e.kind == "ack"; });
  REQUIRE(acks.size() >= 4);
  CHECK(broker->faults()->fired(1) == 1);
  CHECK(broker->faults()->fired(2) == 1);
  const auto publishes = journal.entries([](const JournalEntry& e) { return e.kind == "publish"; });
  REQUIRE(publishes.size() == 3);
  CHECK(publishes[0].topic == "t");
  CHECK(publishes[0].count == 1);
  CHECK(publishes[0].bytes == 1);
  const auto delivered = journal.entries([](const JournalEntry& e) { return !e.received; });
  REQUIRE(delivered.size() >= 5);
  CHECK(delivered[0].kind == "deliver");
  CHECK(delivered[0].channel == "g");
  CHECK(delivered[0].count == 1);  // attempts
  std::lock_guard<std::mutex> lock(got.mutex);
  CHECK(std::count(got.seen.begin(), got.seen.end(), "c#1") == 2);
  CHECK(std::count(got.seen.begin(), got.seen.end(), "b#2") == 1);
}

TEST_CASE("mem test broker: a swallowed delivery times out, a closed session reconnects",
          "[mem][faults]") {
  Deliveries got;
  auto broker = mem::testing::start_broker();
  broker->faults()->add(testing::parse_fault_rule("unit=deliver,once,swallow"));
  broker->faults()->add(testing::parse_fault_rule("unit=subscribe,nth=2,close"));
  std::atomic<int> disconnects{0};
  ConnectOptions watch;
  watch.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) ++disconnects;
  };
  auto client = connect(broker->url(), watch);
  SubscribeOptions group;
  group.group = "g";
  auto sub = client.subscribe("t", group, [&](Message& m) {
    std::lock_guard<std::mutex> lock(got.mutex);
    got.seen.push_back(std::string(m.payload()) + "#" + std::to_string(m.attempts()));
    got.changed.notify_all();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  REQUIRE(got.wait_for(1));  // the second copy, after the 500 ms msg_timeout
  {
    std::lock_guard<std::mutex> lock(got.mutex);
    CHECK(got.seen == std::vector<std::string>{"x#2"});
  }
  // A second subscription's subscribe closes the session: the client reconnects and both
  // subscriptions come back.
  auto second = client.subscribe("t2", group, [](Message&) {});
  REQUIRE(second.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(eventually([&] { return disconnects >= 1; }));
  REQUIRE(client.publish_sync("t", "y") == std::error_code{});
  REQUIRE(got.wait_for(2));
}
