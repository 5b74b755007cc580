// SPDX-License-Identifier: Apache-2.0
// The application contract on every broker (docs/abstraction.md, "Threads and ownership"): a
// handler that answers through its message's client owns nothing, and a close from inside a
// handler neither waits for that handler nor leaves its message unsettled.
#include <future>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

CONTRACT_CASE(a_relay_through_its_messages_client_keeps_nothing_alive) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  const auto in = unique_name("relay-in"), out = unique_name("relay-out");
  Collector relayed;
  Client reader = env.connect();
  auto sink = reader.subscribe(out, {}, [&](Message& m) { relayed.add(std::string(m.payload())); });
  REQUIRE(sink.wait_ready(test::kWaitBound) == std::error_code{});
  auto relay = std::make_unique<Client>(env.connect());
  // The natural relay: it publishes through the client that delivered the message.
  auto relay_sub = relay->subscribe(
      in, {}, [out](Message& m) { m.client().publish(out, std::string(m.payload()), {}); });
  REQUIRE(relay_sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(reader.publish_sync(in, "hello") == std::error_code{});
  REQUIRE(relayed.wait_for_count(1));
  CHECK(relayed.count("hello") >= 1);
  // The relayed copy can arrive while the handler is still inside publish, holding the client
  // for that call: once its time is recorded it has returned, so the handle dropped next is
  // the last one and the client's threads are joined here, not by a thread still finishing
  // after this process has exited.
  REQUIRE(test::eventually([&] {
    for (const auto& s : relay->metrics().subscriptions)
      if (s.topic == in && s.handler_time.count >= 1) return true;
    return false;
  }));
  relay.reset();  // the application's only handle: the handler holds none
  CHECK(test::eventually([&] { return !relay_sub.active(); }));
  CHECK(reader.close_sync(10s) == std::error_code{});
}

CONTRACT_CASE(close_sync_in_a_handler_returns_at_once_and_its_message_is_settled) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  const auto topic = unique_name("close-in-handler");
  Options options;
  options.set("close_timeout", std::chrono::seconds(30));
  Client client = env.connect(options);
  std::promise<Status> closed_in_handler;
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    closed_in_handler.set_value(m.client().close_sync(std::chrono::seconds(30)));
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  Client publisher = env.connect();
  REQUIRE(publisher.publish_sync(topic, "last") == std::error_code{});
  auto result = closed_in_handler.get_future();
  // Well inside the close's 30 s: a close_sync that waited for its own handler would be there.
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(result.get() == std::error_code{});
  // The close goes on once the handler returned, and the message is acknowledged on the way.
  CHECK(test::eventually([&] { return !sub.active(); }));
  if (env.caps.ack) CHECK(client.stats().acked == 1);
  CHECK(publisher.close_sync(10s) == std::error_code{});
}
