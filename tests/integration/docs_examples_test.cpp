// The examples of docs/testing.md, verbatim, so that they keep compiling and passing.
#include <future>
#include <catch2/catch.hpp>
#include <polybus/all.hpp>
#include <polybus/figg_testing.hpp>
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
