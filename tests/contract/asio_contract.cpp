// SPDX-License-Identifier: Apache-2.0
// The Asio face on every broker (polybus/asio/async.hpp): each asynchronous operation through a
// completion token, a cancellation before and after the broker has the operation, and C++20
// coroutines that consume, serve and give up at a deadline through a PullSubscription.
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <future>
#include <optional>
#include <set>

#include "contract.hpp"
#include "polybus/asio/async.hpp"

using namespace polybus;
using namespace polybus::contract;
using namespace asio::experimental::awaitable_operators;

namespace {

// Runs the coroutine `body(io)` on an io_context of the test thread (so that Catch2's checks run
// there) until it ends, or the wait bound; gives what it returned ("" when every step went as it
// should), what it threw, or that it did not end.
template <typename Body>
std::string run_coroutine(Body body) {
  asio::io_context io;
  std::optional<std::string> result;
  asio::co_spawn(io, body(io), [&](std::exception_ptr thrown, std::string what) {
    if (!thrown) {
      result = std::move(what);
      return;
    }
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      result = std::string("threw: ") + e.what();
    }
  });
  io.run_for(test::kWaitBound);
  return result ? *result : "the coroutine did not end within the wait bound";
}

template <typename T>
bool ready_within(std::future<T>& future, std::chrono::milliseconds bound) {
  return future.wait_for(bound) == std::future_status::ready;
}

}  // namespace

CONTRACT_CASE(every_asynchronous_operation_completes_through_an_asio_token) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  auto client = env.connect();
  const auto topic = unique_name("asio-ops");
  Collector received;
  auto sub = client.subscribe(topic, [&](Message& m) { received.add(std::string(m.payload())); });
  CHECK(async_wait_ready(sub, test::kWaitBound, asio::use_future).get() == std::error_code{});
  CHECK(async_publish(client, topic, "one", asio::use_future).get() == std::error_code{});
  PublishOptions options;
  options.timeout = 10s;
  CHECK(async_publish(client, topic, "two", options, asio::use_future).get() == std::error_code{});
  std::size_t sent = 2;
  if (env.caps.batch_publish) {
    CHECK(async_publish_batch(client, topic, {"three", "four"}, asio::use_future).get() ==
          std::error_code{});
    sent += 2;
  }
  CHECK(async_flush(client, 10s, asio::use_future).get() == std::error_code{});
  if (env.broker->answers_ping()) {
    CHECK(async_ping(client, asio::use_future).get() == std::error_code{});
    CHECK(async_ping(client, 10s, asio::use_future).get() == std::error_code{});
  }
  REQUIRE(received.wait_for_count(sent));
  CHECK(received.count("one") >= 1);
  CHECK(received.count("two") >= 1);
  CHECK(async_unsubscribe(sub, asio::use_future).get() == std::error_code{});
  CHECK(async_close(client, 10s, asio::use_future).get() == std::error_code{});
  // Through a reference whose client is gone: closed, at once.
  ClientRef gone;
  {
    auto other = env.connect();
    gone = other;
  }
  CHECK(async_publish(gone, topic, "late", asio::use_future).get() == errc::closed);
  CHECK(async_ping(gone, asio::use_future).get() == errc::closed);
}

CONTRACT_CASE(a_publish_cancelled_before_the_broker_has_it_completes_once_and_at_once) {
  CONTRACT_REQUIRES(env.caps.publish);
  auto client = env.connect();
  REQUIRE(client.publish_sync(unique_name("warm"), "x") == std::error_code{});
  env.broker->stop();  // nothing reaches the broker from here on
  asio::cancellation_signal signal;
  std::atomic<int> completions{0};
  std::promise<Status> outcome;
  PublishOptions options;
  options.timeout = 60s;  // far past the wait below: only the cancellation can end it early
  async_publish(client, unique_name("cancelled"), "x", options,
                asio::bind_cancellation_slot(signal.slot(), [&](Status status) {
                  if (++completions == 1) outcome.set_value(std::move(status));
                }));
  signal.emit(asio::cancellation_type::terminal);
  auto result = outcome.get_future();
  REQUIRE(ready_within(result, 10s));
  const Status status = result.get();
  INFO(status.message());
  // The cancellation, unless the client had failed the publish already (a scheme that fails
  // publishes at once while disconnected): never a success, never twice.
  if (status == errc::canceled) {
    CHECK_THAT(status.cause(), Catch::Contains("may still reach the broker"));
  } else {
    CHECK(status.code() != std::error_code{});
  }
  env.broker->start();
  CHECK(client.close_sync(10s).code() != errc::would_block_io_thread);
  CHECK(completions.load() == 1);
}

CONTRACT_REQUEST_CASE(a_request_cancelled_while_its_responder_works_completes_at_once) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto server = env.connect();
  auto client = env.connect();
  const auto topic = unique_name("asio-cancel");
  std::promise<void> taken;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> first{true};
  auto sub = server.serve(topic, [&](Message& m) {
    if (first.exchange(false)) {
      taken.set_value();
      released.wait_for(test::kWaitBound);
    }
    return "re:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  asio::cancellation_signal signal;
  std::atomic<int> completions{0};
  std::promise<Reply> outcome;
  async_request(client, topic, "q", 60s,
                asio::bind_cancellation_slot(signal.slot(), [&](Reply reply) {
                  if (++completions == 1) outcome.set_value(std::move(reply));
                }));
  auto reached = taken.get_future();
  REQUIRE(ready_within(reached, test::kWaitBound));  // the responder has it: past the broker
  signal.emit(asio::cancellation_type::terminal);
  auto result = outcome.get_future();
  REQUIRE(ready_within(result, 10s));
  const Reply reply = result.get();
  INFO(reply.detail);
  CHECK(reply.ec == errc::canceled);
  CHECK_THAT(reply.detail, Catch::Contains("reply is dropped"));
  release.set_value();
  // The reply that comes after is dropped: the next request gets its own, and nothing twice.
  const Reply next = async_request(client, topic, "r", 10s, asio::use_future).get();
  CHECK(next.ec == std::error_code{});
  CHECK(next.payload == "re:r");
  CHECK(client.close_sync(10s) == std::error_code{});
  CHECK(server.close_sync(10s) == std::error_code{});
  CHECK(completions.load() == 1);
}

CONTRACT_CASE(a_coroutine_receives_settles_and_gives_up_a_receive_at_its_deadline) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  auto consumer = env.connect();
  auto publisher = env.connect();
  const auto topic = unique_name("pull");
  SubscribeOptions options;
  options.max_in_flight = 4;
  PullSubscription pull = consumer.pull_subscribe(topic, options);
  REQUIRE(pull.subscription().wait_ready(test::kWaitBound) == std::error_code{});
  constexpr int kMessages = 10;  // more than max_in_flight: back-pressure, then more
  for (int i = 0; i < kMessages; ++i)
    REQUIRE(publisher.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  std::promise<Status> ended;
  const std::string failure =
      run_coroutine([&](asio::io_context& io) -> asio::awaitable<std::string> {
        std::multiset<std::string> got;
        for (int i = 0; i < kMessages; ++i) {
          auto [status, m] = co_await async_receive(pull, asio::use_awaitable);
          if (status) co_return "receive " + std::to_string(i) + ": " + status.message();
          got.insert(std::string(m.payload()));
          if (env.caps.ack && m.ack()) co_return "ack of " + std::string(m.payload()) + " failed";
        }
        for (int i = 0; i < kMessages; ++i)
          if (got.count("m" + std::to_string(i)) == 0)
            co_return "m" + std::to_string(i) + " missing";
        // Nothing more to receive: the timer wins, and the receive it cancels takes nothing.
        asio::steady_timer deadline(io, 200ms);
        auto first = co_await (async_receive(pull, asio::use_awaitable) ||
                               deadline.async_wait(asio::use_awaitable));
        if (first.index() != 1) co_return "a receive with nothing to receive completed";
        if (publisher.publish_sync(topic, "after")) co_return "publish after the deadline failed";
        auto [status, m] = co_await async_receive(pull, asio::use_awaitable);
        if (status) co_return "receive after the deadline: " + status.message();
        if (m.payload() != "after") co_return "received '" + std::string(m.payload()) + "'";
        if (env.caps.ack && m.ack()) co_return "ack of 'after' failed";
        // A receive still waiting when the subscription ends completes with the end (after
        // any message a broker without acknowledgements sends again).
        std::function<void(const Status&, Message)> until_end = [&](const Status& why, Message) {
          if (why)
            ended.set_value(why);
          else
            pull.receive(until_end);
        };
        pull.receive(until_end);
        const Status unsubscribed =
            co_await async_unsubscribe(pull.subscription(), asio::use_awaitable);
        if (unsubscribed) co_return "unsubscribe: " + unsubscribed.message();
        co_return "";
      });
  CHECK(failure == "");
  auto end = ended.get_future();
  REQUIRE(ready_within(end, test::kWaitBound));
  CHECK(end.get() == errc::closed);
  if (env.caps.ack)
    CHECK(test::eventually([&] { return consumer.stats().acked == kMessages + 1; }));
  CHECK(consumer.close_sync(10s) == std::error_code{});
  CHECK(publisher.close_sync(10s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(
    a_coroutine_serves_the_requests_it_pulls_and_a_requester_gives_up_at_its_deadline) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto server = env.connect();
  auto client = env.connect();
  const auto topic = unique_name("pull-serve");
  PullSubscription requests = server.pull_serve(topic);
  REQUIRE(requests.subscription().wait_ready(test::kWaitBound) == std::error_code{});
  const std::string failure =
      run_coroutine([&](asio::io_context& io) -> asio::awaitable<std::string> {
        // Nobody takes this request yet: the requester's timer wins and cancels it.
        asio::steady_timer deadline(io, 200ms);
        auto first = co_await (async_request(client, topic, "late", 60s, asio::use_awaitable) ||
                               deadline.async_wait(asio::use_awaitable));
        if (first.index() != 1) co_return "the request nobody served completed";
        // Served now: its reply is dropped, and the next requests get their own.
        auto [status, late] = co_await async_receive(requests, asio::use_awaitable);
        if (status) co_return "receive: " + status.message();
        if (late.payload() != "late") co_return "served '" + std::string(late.payload()) + "'";
        if (late.reply("re:late")) co_return "reply to 'late' refused";
        for (int i = 0; i < 3; ++i) {
          const std::string payload = "q" + std::to_string(i);
          auto asked = async_request(client, topic, payload, 10s, asio::use_future);
          auto [received, m] = co_await async_receive(requests, asio::use_awaitable);
          if (received) co_return "receive: " + received.message();
          if (!m.expects_reply()) co_return "a request that expects no reply";
          if (m.reply("re:" + std::string(m.payload()))) co_return "reply refused";
          const Reply reply = asked.get();
          if (reply.ec) co_return payload + ": " + reply.status().message();
          if (reply.payload != "re:" + payload)
            co_return payload + " answered '" + reply.payload + "'";
        }
        co_return "";
      });
  CHECK(failure == "");
  CHECK(client.close_sync(10s) == std::error_code{});
  CHECK(server.close_sync(10s) == std::error_code{});
}

CONTRACT_CASE(a_close_gives_back_what_waits_in_a_pull_subscription_and_does_not_wait_for_it) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  auto consumer = env.connect();
  auto publisher = env.connect();
  const auto topic = unique_name("pull-close");
  PullSubscription pull = consumer.pull_subscribe(topic);
  REQUIRE(pull.subscription().wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(publisher.publish_sync(topic, "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(test::eventually([&] { return pull.waiting() == 3; }));
  // Nobody takes them: a close that waits for messages in flight (NSQ's) must not wait for these.
  CHECK(consumer.close_sync(10s) == std::error_code{});
  CHECK(pull.waiting() == 0);
  const auto [status, m] = pull.receive_sync(test::kWaitBound);
  CHECK(status == errc::closed);
  CHECK(!m);
  CHECK(publisher.close_sync(10s) == std::error_code{});
}

CONTRACT_CASE(every_asio_operation_cancelled_before_the_broker_answers_completes_once_at_once) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  auto client = env.connect();
  const auto topic = unique_name("cancel-all");
  auto sub = client.subscribe(topic, [](Message&) {});
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  // With the broker gone nothing the operations wait for can come; each is cancelled
  // where it waits, and completes once, with errc::canceled or, where the client failed it
  // first (a scheme that fails work at once while disconnected), with that failure.
  env.broker->stop();
  struct Outcome {
    std::string name;
    asio::cancellation_signal signal;
    std::promise<Status> status;
    std::atomic<int> completions{0};
    auto handler() {
      return asio::bind_cancellation_slot(signal.slot(), [this](Status s) {
        if (++completions == 1) status.set_value(std::move(s));
      });
    }
  };
  std::vector<std::unique_ptr<Outcome>> outcomes;
  const auto add = [&](const std::string& name) -> Outcome& {
    outcomes.push_back(std::make_unique<Outcome>());
    outcomes.back()->name = name;
    return *outcomes.back();
  };
  PublishOptions long_deadline;
  long_deadline.timeout = 60s;
  async_publish(client, topic, "x", long_deadline, add("publish").handler());
  if (env.caps.batch_publish)
    async_publish_batch(client, topic, {"y", "z"}, long_deadline, add("publish_batch").handler());
  async_flush(client, 60s, add("flush").handler());
  if (env.broker->answers_ping()) async_ping(client, 60s, add("ping").handler());
  auto late_sub = client.subscribe(unique_name("cancel-late"), [](Message&) {});
  async_wait_ready(late_sub, 60s, add("wait_ready").handler());
  async_unsubscribe(sub, add("unsubscribe").handler());
  for (auto& outcome : outcomes) outcome->signal.emit(asio::cancellation_type::terminal);
  for (auto& outcome : outcomes) {
    INFO(outcome->name);
    auto future = outcome->status.get_future();
    REQUIRE(ready_within(future, 10s));
    const Status status = future.get();
    INFO(status.message());
    // A cancellation, or the client's own answer if it came first: never a second completion.
    if (status == errc::canceled)
      CHECK_THAT(status.cause(), Catch::Contains("cancelled by the caller"));
  }
  // A close cancelled completes at once (the publishes above still hold it), and the close goes
  // on; what it then completes in the client reaches no handler a second time.
  auto& closing = add("close");
  async_close(client, 2s, closing.handler());
  closing.signal.emit(asio::cancellation_type::terminal);
  auto closed = closing.status.get_future();
  REQUIRE(ready_within(closed, 5s));
  INFO(closed.get().message());
  (void)client.close_sync(20s);  // the close itself, to its end
  env.broker->start();
  for (auto& outcome : outcomes) {
    INFO(outcome->name);
    CHECK(outcome->completions.load() == 1);
  }
}
