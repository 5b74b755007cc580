// SPDX-License-Identifier: Apache-2.0
// The examples of docs/testing.md, verbatim, so that they keep compiling and passing.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <polybus/all.hpp>
#include <polybus/fault_proxy.hpp>
#include <polybus/figg_testing.hpp>
#include <polybus/manual_clock.hpp>
#include <polybus/nsq/error.hpp>
#include <polybus/nsq_testing.hpp>

TEST_CASE("orders are shared by the billing group and retried once") {
  polybus::register_all_schemes();
  auto nsqd = polybus::nsq::testing::Nsqd::start();
  auto client = polybus::connect("nsq://" + nsqd->tcp_address() + "?requeue_delay=0");
  std::atomic<int> attempts{0};
  polybus::SubscribeOptions group;
  group.group = "billing";
  auto sub = client.subscribe("orders", group, [&](polybus::Message&) {
    if (++attempts == 1) throw std::runtime_error("first attempt fails");  // nacked
  });
  REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
  REQUIRE(client.publish_sync("orders", "order-1") == std::error_code{});
  REQUIRE(nsqd->wait_until([&] {
    return nsqd->requeue_count("orders", "billing") == 1 &&
           nsqd->channel_depth("orders", "billing") == 0 &&
           nsqd->in_flight("orders", "billing") == 0;
  }));
  CHECK(attempts == 2);
}

TEST_CASE("a subscription resumes from the offset it stopped at") {
  polybus::register_all_schemes();
  auto broker = polybus::figg::testing::Broker::launch();
  auto client = polybus::connect("figg://" + broker->address());
  for (auto text : {"a", "bb", "ccc"})
    REQUIRE(client.publish_sync("log", text) == std::error_code{});
  std::promise<std::string> got;
  polybus::SubscribeOptions from;
  from.from_offset = 5;  // after "a" (each message takes 4 + its length)
  auto sub = client.subscribe("log", from, [&](polybus::Message& m) {
    if (m.payload() == "bb") got.set_value(std::string(m.payload()));
  });
  auto future = got.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
}

TEST_CASE("a publisher rides out a network that goes silent") {
  polybus::register_all_schemes();
  auto nsqd = polybus::nsq::testing::Nsqd::start();
  polybus::testing::FaultProxyOptions to_nsqd;
  to_nsqd.upstream_port = nsqd->tcp_port();
  polybus::testing::FaultProxy proxy(to_nsqd);
  std::promise<void> gave_up;
  std::once_flag once;
  polybus::ConnectOptions options;
  options.on_state = [&](const polybus::StateEvent& e) {
    if (e.state == polybus::ConnectionState::disconnected)
      std::call_once(once, [&] { gave_up.set_value(); });
  };
  // Heartbeats every second: two silent seconds and the connection is presumed dead.
  auto client = polybus::connect(
      "nsq://" + proxy.address() + "?heartbeat_interval=1s&reconnect_initial=10ms", options);
  REQUIRE(client.publish_sync("orders", "before") == std::error_code{});

  polybus::testing::Faults silent;
  silent.blackhole = true;  // nothing gets through, and nobody closes
  proxy.set_faults(silent);
  REQUIRE(gave_up.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  proxy.clear_faults();
  REQUIRE(client.publish_sync("orders", "after") == std::error_code{});
  CHECK(nsqd->topic_message_count("orders") == 2);
  CHECK(proxy.counters().accepted >= 2);  // the client connected again
}

TEST_CASE("the consumer finishes every message and never asks for more than max_in_flight") {
  polybus::register_all_schemes();
  polybus::nsq::testing::NsqdOptions options;
  options.journal_capacity = 10000;
  auto nsqd = polybus::nsq::testing::Nsqd::start(options);
  auto client = polybus::connect("nsq://" + nsqd->tcp_address() + "?max_in_flight=4");
  std::atomic<int> handled{0};
  polybus::SubscribeOptions group;
  group.group = "audit";
  auto sub = client.subscribe("events", group, [&](polybus::Message&) { ++handled; });
  REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
  for (int i = 0; i < 20; ++i)
    REQUIRE(client.publish_sync("events", "event " + std::to_string(i)) == std::error_code{});
  REQUIRE(
      nsqd->wait_until([&] { return handled == 20 && nsqd->in_flight("events", "audit") == 0; }));

  using Entry = polybus::testing::JournalEntry;
  auto& journal = nsqd->journal();
  const auto deliveries = journal.entries([](const Entry& e) { return e.kind == "message"; });
  CHECK(deliveries.size() == 20);
  for (const Entry& delivery : deliveries)  // one FIN each, on the connection it went to
    CHECK(journal
              .entries([&](const Entry& e) {
                return e.kind == "FIN" && e.id == delivery.id &&
                       e.connection == delivery.connection;
              })
              .size() == 1);
  for (const Entry& rdy : journal.entries([](const Entry& e) { return e.kind == "RDY"; }))
    CHECK(rdy.count <= 4);
}

TEST_CASE("a message not finished within nsqd's 60 s msg_timeout is delivered again") {
  polybus::register_all_schemes();
  auto clock = std::make_shared<polybus::ManualClock>();
  polybus::nsq::testing::NsqdOptions options;
  options.clock = clock;  // msg_timeout stays nsqd's 60 s
  auto nsqd = polybus::nsq::testing::Nsqd::start(options);
  auto client = polybus::connect("nsq://" + nsqd->tcp_address());
  std::mutex mutex;
  std::condition_variable delivered;
  std::vector<polybus::Message> held;
  polybus::SubscribeOptions group;
  group.group = "workers";
  group.max_in_flight = 2;  // the client, on the real clock, still counts the first copy
  auto sub = client.subscribe("jobs", group, [&](polybus::Message& m) {
    m.take_manual_control();  // never finished
    std::lock_guard<std::mutex> lock(mutex);
    held.push_back(m);
    delivered.notify_all();
  });
  const auto deliveries = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return delivered.wait_for(lock, std::chrono::seconds(10), [&] { return held.size() >= n; });
  };
  REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
  REQUIRE(client.publish_sync("jobs", "job-1") == std::error_code{});
  REQUIRE(deliveries(1));

  clock->advance(std::chrono::seconds(59));
  CHECK(nsqd->timeout_count("jobs", "workers") == 0);
  clock->advance(std::chrono::seconds(1));
  CHECK(nsqd->timeout_count("jobs", "workers") == 1);  // before advance() returned
  REQUIRE(deliveries(2));
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(held[1].attempts() == 2);
  // Both answered, so that close() does not wait for them: the first FIN finishes the message
  // at nsqd, which answers the second E_FIN_FAILED (an error event at the client).
  CHECK(held[1].ack() == std::error_code{});
  CHECK(held[0].ack() == std::error_code{});
}

TEST_CASE("a client's 60 s reconnect backoff passes when the test advances its clock") {
  polybus::register_all_schemes();
  auto clock = std::make_shared<polybus::ManualClock>();
  auto nsqd = polybus::nsq::testing::Nsqd::start();
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<polybus::ConnectionState> states;
  polybus::ConnectOptions options;
  options.clock = clock;
  options.reconnect_backoff =
      polybus::Backoff::custom([](std::uint32_t) { return std::chrono::seconds(60); });
  options.on_state = [&](const polybus::StateEvent& e) {
    std::lock_guard<std::mutex> lock(mutex);
    states.push_back(e.state);
    changed.notify_all();
  };
  auto client = polybus::connect("nsq://" + nsqd->tcp_address(), options);
  REQUIRE(client.publish_sync("jobs", "job-1") == std::error_code{});

  nsqd->restart();  // the connection drops: the next attempt is 60 s away
  std::unique_lock<std::mutex> lock(mutex);
  REQUIRE(changed.wait_for(lock, std::chrono::seconds(10), [&] {
    return states.back() == polybus::ConnectionState::reconnecting;
  }));
  const std::size_t waiting = states.size();
  lock.unlock();
  clock->advance(std::chrono::seconds(59));
  lock.lock();
  CHECK(states.size() == waiting);  // no attempt yet
  lock.unlock();
  clock->advance(std::chrono::seconds(1));  // the attempt is due: the next publish goes
  // Asynchronous: its deadline is on the manual clock, which this thread alone advances.
  auto published = std::make_shared<std::promise<polybus::Status>>();
  auto result = published->get_future();
  client.publish("jobs", "job-2",
                 [published](const polybus::Status& s) { published->set_value(s); });
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK_FALSE(result.get());
}

TEST_CASE("the third FIN fails: the client reports it, and nsqd delivers that message again") {
  polybus::register_all_schemes();
  auto clock = std::make_shared<polybus::ManualClock>();
  polybus::nsq::testing::NsqdOptions options;
  options.clock = clock;
  options.faults.push_back(
      polybus::testing::parse_fault_rule("unit=FIN,nth=3,error=E_FIN_FAILED FIN failed"));
  auto nsqd = polybus::nsq::testing::Nsqd::start(options);
  std::atomic<int> fin_failures{0};
  polybus::ConnectOptions watch;
  watch.on_error = [&](std::error_code ec, const std::string&) {
    if (ec == polybus::nsq::errc::e_fin_failed) ++fin_failures;
  };
  auto client = polybus::connect("nsq://" + nsqd->tcp_address(), watch);
  std::atomic<int> handled{0};
  polybus::SubscribeOptions group;
  group.group = "billing";
  auto sub = client.subscribe("orders", group, [&](polybus::Message&) { ++handled; });
  REQUIRE(sub.wait_ready(std::chrono::seconds(10)) == std::error_code{});
  for (int i = 1; i <= 5; ++i)
    REQUIRE(client.publish_sync("orders", "order " + std::to_string(i)) == std::error_code{});
  // Five handled, and the one whose FIN failed still in flight at nsqd.
  REQUIRE(
      nsqd->wait_until([&] { return handled == 5 && nsqd->in_flight("orders", "billing") == 1; }));
  CHECK(nsqd->faults().fired(1) == 1);

  clock->advance(std::chrono::seconds(60));  // its msg_timeout: delivered again, finished
  REQUIRE(
      nsqd->wait_until([&] { return handled == 6 && nsqd->in_flight("orders", "billing") == 0; }));
  CHECK(nsqd->timeout_count("orders", "billing") == 1);
  CHECK(fin_failures == 1);
}

TEST_CASE("a seeded probability fault fails the same publishes on every run") {
  polybus::register_all_schemes();
  const auto failed_publishes = [] {
    polybus::nsq::testing::NsqdOptions options;
    options.faults.push_back(polybus::testing::parse_fault_rule(
        "unit=PUB,probability=0.3,seed=42,error=E_PUB_FAILED PUB failed"));
    auto nsqd = polybus::nsq::testing::Nsqd::start(options);
    // The client reconnects after an E_PUB_FAILED, as nsqd closes: at once, for the test.
    auto client = polybus::connect("nsq://" + nsqd->tcp_address() +
                                   "?reconnect_initial=1ms&reconnect_max=10ms");
    std::vector<int> failed;
    for (int i = 0; i < 20; ++i)
      if (client.publish_sync("events", "event " + std::to_string(i)) != std::error_code{})
        failed.push_back(i);
    return failed;
  };
  const std::vector<int> first = failed_publishes();
  CHECK_FALSE(first.empty());
  CHECK(first.size() < 20);
  CHECK(failed_publishes() == first);  // the same seed and traffic: the same faults
}
