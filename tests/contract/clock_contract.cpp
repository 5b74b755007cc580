// SPDX-License-Identifier: Apache-2.0
// A client on a ManualClock (ConnectOptions::clock): what it waits for (its reconnect backoff,
// operation deadlines, batch max_wait, middleware timers) comes due only as the test advances
// the clock, on every scheme, while its connections stay on the real clock. The broker keeps the
// real clock here, so each case shows the client's own timers and nothing of the broker's.
#include <condition_variable>

#include "contract.hpp"
#include "polybus/manual_clock.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

// The subscription of `topic`'s figures, or empty ones while it has none.
metrics::SubscriptionMetrics subscription_of(const Client& client, const std::string& topic) {
  for (const auto& s : client.metrics().subscriptions)
    if (s.topic == topic) return s;
  return {};
}

// A publish and a wait for its confirmation bounded on the real clock. publish_sync would wait
// for its deadline on the client's manual clock, which nothing advances meanwhile: a publish that
// could not go would hang the test instead of failing it. The latch's lock orders the result's
// write before its read.
class Published {
 public:
  std::error_code publish(Client& client, const std::string& topic, const std::string& payload) {
    client.publish(topic, payload, [this](const Status& status) {
      result_ = status.code();
      done_.count_down();
    });
    if (!done_.wait_for(++sent_)) return make_error_code(errc::timeout);
    return result_;
  }

 private:
  test::Latch done_;
  std::size_t sent_ = 0;
  std::error_code result_;
};

bool has_connection(const std::string& url) {
  return url.rfind("mem:", 0) != 0;  // mem:// is in the process: nothing to lose or reconnect
}

}  // namespace

CONTRACT_CASE(a_reconnect_backoff_waits_on_the_clients_manual_clock) {
  CONTRACT_REQUIRES(has_connection(env.url) && (env.caps.publish || env.caps.request_reply));
  auto clock = std::make_shared<ManualClock>();
  test::StateRecorder states;
  test::Latch sent;  // before the client: its completion may come as the client closes
  Status result;
  // A scheme that only requests (MemoDB) sends a request to a server on the real clock, which
  // reconnects on its own after the restart.
  Client server;
  Subscription served;
  const auto topic = unique_name("backoff");
  if (!env.caps.publish) {
    server = env.connect();
    served = server.serve(topic, [](Message&) { return std::string("ok"); });
    REQUIRE(served.wait_ready(test::kWaitBound) == std::error_code{});
  }
  ConnectOptions options;
  options.clock = clock;
  options.on_state = states.callback();
  options.reconnect_backoff =
      Backoff::custom([](std::uint32_t) { return std::chrono::minutes(1); });
  auto client = polybus::connect(env.url, options);
  const auto send = [&] {
    if (env.caps.publish)
      client.publish(topic, "x", [&](const Status& status) {
        result = status;
        sent.count_down();
      });
    else
      client.request(topic, "x", [&](Reply reply) {
        result = reply.status();
        sent.count_down();
      });
  };
  send();
  REQUIRE(sent.wait_for(1));
  REQUIRE_FALSE(result);

  env.broker->stop();
  const auto waiting = states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::reconnecting && e.retry_in == std::chrono::minutes(1);
  });
  REQUIRE(waiting);
  env.broker->start();
  const auto attempt = [](const StateEvent& e) { return e.state == ConnectionState::connecting; };
  // Everything due within 59 s ran before advance() returned, and the attempt was not among it.
  clock->advance(std::chrono::seconds(59));
  CHECK_FALSE(states.wait_for(attempt, *waiting + 1, std::chrono::milliseconds(0)));
  clock->advance(std::chrono::seconds(1));
  // The attempt is due: the next publish or request goes (a publisher that connects on demand,
  // as NSQ's, connects for it). Asynchronous: a *_sync call on this thread would wait for its
  // deadline on the manual clock, which nothing would advance if it could not go.
  send();
  REQUIRE(sent.wait_for(2));
  CHECK_FALSE(result);
}

CONTRACT_CASE(a_request_deadline_passes_only_as_the_clients_manual_clock_advances) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto server = env.connect();
  auto clock = std::make_shared<ManualClock>();
  ConnectOptions options;
  options.clock = clock;
  auto client = polybus::connect(env.url, options);
  auto topic = unique_name("rpcclock");
  auto sub = server.serve(topic, [](Message& m) {
    m.take_manual_control();  // never replies
    return std::string();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  test::Latch answered;
  std::error_code result;
  RequestOptions request;
  request.timeout = std::chrono::seconds(30);
  client.request(topic, "q", request, [&](Reply reply) {
    result = reply.ec;
    answered.count_down();
  });
  // Whether the request reached the server before the clock moved does not matter: nothing but
  // the deadline can answer it.
  clock->advance(std::chrono::seconds(29));
  CHECK(answered.count() == 0);
  clock->advance(std::chrono::seconds(1));
  REQUIRE(answered.wait_for(1));
  CHECK(result == errc::timeout);
}

CONTRACT_CASE(a_batch_is_handed_over_at_max_wait_on_the_clients_manual_clock) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  auto clock = std::make_shared<ManualClock>();
  ConnectOptions options;
  options.clock = clock;
  Published published;  // before the client: its completion may come as the client closes
  auto client = polybus::connect(env.url, options);
  auto topic = unique_name("batchclock");
  SubscribeOptions subscribe;
  subscribe.max_in_flight = 100;  // far more than arrive: only max_wait can end the batch
  // A middleware sees each message as it joins the batch: once next() returned, the batch has
  // begun, and its max_wait is reckoned from the clock's time then.
  test::Latch joined;
  subscribe.middleware.push_back([&](Message& m, const MessageHandler& next) {
    next(m);
    joined.count_down();
  });
  test::Latch handed;
  std::size_t size = 0;
  auto sub = client.subscribe_batch(topic, subscribe, BatchOptions{100, std::chrono::hours(1)},
                                    [&](Batch& b) {
                                      size = b.size();
                                      handed.count_down();
                                    });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(published.publish(client, topic, "one") == std::error_code{});
  REQUIRE(joined.wait_for(1));
  // An hour: on the real clock the batch would not come within the wait's bound.
  clock->advance(std::chrono::minutes(59));
  CHECK(handed.count() == 0);
  clock->advance(std::chrono::minutes(1));
  REQUIRE(handed.wait_for(1));
  CHECK(size >= 1);  // a broker may have sent it again meanwhile, on its own clock
}

CONTRACT_CASE(middleware_timeout_gives_a_message_back_on_the_clients_manual_clock) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe && env.caps.ack);
  auto clock = std::make_shared<ManualClock>();
  ConnectOptions options;
  options.clock = clock;
  options.on_error = [](std::error_code, const std::string&) {};  // the nack is reported
  test::Gate release;
  test::Latch started;
  Published published;
  auto client = polybus::connect(env.url, options);
  auto topic = unique_name("timeoutclock");
  SubscribeOptions subscribe;
  subscribe.middleware.push_back(middleware::timeout(std::chrono::seconds(10)));
  auto sub = client.subscribe(topic, subscribe, [&](Message&) {
    started.count_down();
    release.wait();
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(published.publish(client, topic, "slow") == std::error_code{});
  REQUIRE(started.wait_for(1));
  clock->advance(std::chrono::seconds(9));
  CHECK(subscription_of(client, topic).handler_timeouts == 0);
  clock->advance(std::chrono::seconds(1));
  CHECK(subscription_of(client, topic).handler_timeouts == 1);
  release.open();
  CHECK_FALSE(sub.unsubscribe_sync(std::chrono::seconds(5)));
}
