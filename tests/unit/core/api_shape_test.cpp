// SPDX-License-Identifier: Apache-2.0
// Every public overload of the client, called with the literals an application writes (100,
// true, "5s", std::chrono::seconds(5), {}, a lambda), in the one shape every operation has: what
// it acts on, its data, its options (a deadline is one), then its completion. A call here that
// became ambiguous or changed meaning fails the build or the checks; each runs against mem://.
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>

#include "polybus/all.hpp"
#include "polybus/asio/async.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace std::chrono_literals;
using test::Collector;

namespace {

// What a completion was given, for the test thread.
template <typename T>
struct Outcome {
  std::shared_ptr<std::promise<T>> promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  auto callback() {
    return [p = promise](T value) { p->set_value(std::move(value)); };
  }
  T get() {
    REQUIRE(future.wait_for(test::kWaitBound) == std::future_status::ready);
    return future.get();
  }
};

Client served_client() {
  register_all_schemes();
  ConnectOptions connect_options;
  connect_options.options.set("max_in_flight", 100);                      // an int literal
  connect_options.options.set("tls", false);                              // a bool
  connect_options.options.set("op_timeout", "5s");                        // the text a URL has
  connect_options.options.set("close_timeout", std::chrono::seconds(5));  // a duration
  connect_options.options.set("requeue_delay", 250ms);
  connect_options.options.set("max_attempts", 5u);  // unsigned
  connect_options.options.set("handler_concurrency", std::int64_t{2});
  return connect(test::unique_name("mem://shape"), std::move(connect_options));
}

}  // namespace

TEST_CASE("options take the literals an application writes", "[api]") {
  Options options;
  options.set("max_in_flight", 100);
  options.set("max_in_flight", 100L);
  options.set("max_in_flight", std::uint32_t{100});
  options.set("tls", true);
  options.set("op_timeout", "5s");
  options.set("op_timeout", std::string("5s"));
  options.set("op_timeout", std::string_view("5s"));
  options.set("op_timeout", std::chrono::seconds(5));
  options.set("op_timeout", 1500ms);
  CHECK(options.values().at("max_in_flight") == "100");
  CHECK(options.values().at("tls") == "true");
  CHECK(options.values().at("op_timeout") == "1500ms");
}

TEST_CASE("publish, request, serve, flush, ping and close in one shape, with every literal",
          "[api]") {
  Client client = served_client();
  auto served =
      client.serve("shape-rpc", [](Message& m) { return "re:" + std::string(m.payload()); });
  SubscribeOptions serve_options;
  serve_options.concurrency = 2;
  auto served_with_options = client.serve(
      "shape-rpc2", serve_options, [](Message& m) { return "re2:" + std::string(m.payload()); });
  auto served_with_braces = client.serve("shape-rpc3", {}, [](Message&) { return std::string(); });
  Collector received;
  auto sub = client.subscribe("shape", [&](Message& m) { received.add(std::string(m.payload())); });
  auto sub_with_options = client.subscribe("shape-o", {}, [](Message&) {});
  for (auto* s : {&served, &served_with_options, &served_with_braces, &sub, &sub_with_options})
    REQUIRE(s->wait_ready(test::kWaitBound) == std::error_code{});

  Outcome<Status> p1, p2, p3, p4, p5, b1, b2;
  client.publish("shape", "a", p1.callback());
  client.publish("shape", "b", {}, p2.callback());
  client.publish("shape", "c", PublishOptions{5s, {}, {}}, p3.callback());
  PublishOptions publish_options;
  publish_options.timeout = 5s;
  client.publish("shape", "d", publish_options, p4.callback());
  client.publish("shape", "e", {});                      // no completion: fire and forget
  client.publish("shape", "f", [](std::error_code) {});  // an error_code fits too
  client.publish("shape", "g", {}, nullptr);
  client.publish_batch("shape", {"h", "i"}, b1.callback());
  client.publish_batch("shape", {"j"}, {}, b2.callback());
  client.publish("shape", "k", PublishOptions{}, p5.callback());
  for (auto* o : {&p1, &p2, &p3, &p4, &p5, &b1, &b2}) CHECK(o->get() == std::error_code{});
  CHECK(client.publish_sync("shape", "l") == std::error_code{});
  CHECK(client.publish_sync("shape", "m", {}) == std::error_code{});
  CHECK(client.publish_sync("shape", "n", publish_options) == std::error_code{});
  REQUIRE(received.wait_for_count(14));

  Outcome<Reply> r1, r2, r3, r4, r5;
  client.request("shape-rpc", "1", r1.callback());
  client.request("shape-rpc", "2", {}, r2.callback());
  client.request("shape-rpc", "3", 5s, r3.callback());
  client.request("shape-rpc", "4", std::chrono::milliseconds(5000), r4.callback());
  client.request("shape-rpc2", "5", RequestOptions(5s, {}), r5.callback());
  CHECK(r1.get().payload == "re:1");
  CHECK(r2.get().payload == "re:2");
  CHECK(r3.get().payload == "re:3");
  CHECK(r4.get().payload == "re:4");
  CHECK(r5.get().payload == "re2:5");
  CHECK(client.request_sync("shape-rpc", "6").payload == "re:6");
  CHECK(client.request_sync("shape-rpc", "7", {}).payload == "re:7");
  CHECK(client.request_sync("shape-rpc", "8", 5s).payload == "re:8");
  CHECK(client.request_sync("shape-rpc", "9", 1.5s).payload == "re:9");

  Outcome<Status> f1, g1, g2, w1;
  client.flush(5s, f1.callback());
  client.ping(g1.callback());
  client.ping(5s, g2.callback());
  sub.wait_ready(5s, w1.callback());
  for (auto* o : {&f1, &g1, &g2, &w1}) CHECK(o->get() == std::error_code{});
  CHECK(client.flush_sync(5s) == std::error_code{});

  // The Asio face has the same shape, the token last.
  CHECK(async_publish(client, "shape", "o", asio::use_future).get() == std::error_code{});
  CHECK(async_publish(client, "shape", "p", {}, asio::use_future).get() == std::error_code{});
  CHECK(async_publish_batch(client, "shape", {"q"}, asio::use_future).get() == std::error_code{});
  CHECK(async_publish_batch(client, "shape", {"r"}, {}, asio::use_future).get() ==
        std::error_code{});
  CHECK(async_request(client, "shape-rpc", "a", asio::use_future).get().payload == "re:a");
  CHECK(async_request(client, "shape-rpc", "b", {}, asio::use_future).get().payload == "re:b");
  CHECK(async_request(client, "shape-rpc", "c", 5s, asio::use_future).get().payload == "re:c");
  CHECK(async_flush(client, 5s, asio::use_future).get() == std::error_code{});
  CHECK(async_ping(client, asio::use_future).get() == std::error_code{});
  CHECK(async_ping(client, 5s, asio::use_future).get() == std::error_code{});
  CHECK(async_wait_ready(sub, 5s, asio::use_future).get() == std::error_code{});
  CHECK(async_unsubscribe(sub_with_options, asio::use_future).get() == std::error_code{});

  Outcome<Status> closed;
  client.close(5s, closed.callback());
  CHECK(closed.get() == std::error_code{});
  CHECK(client.close_sync(5s) == std::error_code{});
}

TEST_CASE("close takes a deadline, a completion, both or neither", "[api]") {
  {
    Client client = served_client();
    client.close();
  }
  {
    Client client = served_client();
    client.close(5s);
  }
  {
    Client client = served_client();
    Outcome<Status> closed;
    client.close(closed.callback());
    CHECK(closed.get() == std::error_code{});
  }
  {
    Client client = served_client();
    CHECK(async_close(client, asio::use_future).get() == std::error_code{});
  }
}

TEST_CASE("the earlier spellings still compile, deprecated, and do what the new ones do", "[api]") {
  Client client = served_client();
  Outcome<Status> published, batch, pinged;
  Outcome<Reply> replied;
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  auto served = client.serve(
      "old-rpc", [](Message& m) { return "re:" + std::string(m.payload()); },
      SubscribeOptions{});  // deprecated order
  REQUIRE(served.wait_ready(test::kWaitBound) == std::error_code{});
  client.publish("old", "x", published.callback(), {});
  client.publish_batch("old", {"y"}, batch.callback(), PublishOptions{});
  client.request("old-rpc", "z", replied.callback(), {});  // this one was ambiguous once
  client.ping(pinged.callback(), 5s);
  auto served_again = client.serve(
      "old-rpc2", [](Message&) { return std::string(); }, SubscribeOptions{});
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  CHECK(published.get() == std::error_code{});
  CHECK(batch.get() == std::error_code{});
  CHECK(replied.get().payload == "re:z");
  CHECK(pinged.get() == std::error_code{});
  CHECK(served_again.wait_ready(test::kWaitBound) == std::error_code{});
}

TEST_CASE("a pull subscription in every form: receive, try_receive, receive_sync, cancel",
          "[api]") {
  Client client = served_client();
  PullSubscription pull = client.pull_subscribe("pull-shape");
  PullSubscription pull_with_options = client.pull_subscribe("pull-shape2", {});
  PullSubscription requests = client.pull_serve("pull-rpc");
  for (auto* p : {&pull, &pull_with_options, &requests})
    REQUIRE(p->subscription().wait_ready(test::kWaitBound) == std::error_code{});
  CHECK(!pull.try_receive());
  const auto nothing = pull.receive_sync(50ms);
  CHECK(nothing.first == errc::timeout);
  // A receive taken back is never answered; the message goes to the next.
  const auto ticket = pull.receive([](const Status&, Message) { FAIL("a cancelled receive ran"); });
  CHECK(pull.cancel_receive(ticket));
  CHECK(!pull.cancel_receive(ticket));
  REQUIRE(client.publish_sync("pull-shape", "one") == std::error_code{});
  auto [status, m] = pull.receive_sync(test::kWaitBound);
  REQUIRE(status == std::error_code{});
  CHECK(m.payload() == "one");
  CHECK(m.ack() == std::error_code{});
  // A request pulled is answered with reply().
  Outcome<Reply> reply;
  client.request("pull-rpc", "q", 10s, reply.callback());
  auto [received, request] = requests.receive_sync(test::kWaitBound);
  REQUIRE(received == std::error_code{});
  CHECK(request.expects_reply());
  CHECK(request.reply("re:q") == std::error_code{});
  CHECK(reply.get().payload == "re:q");
  // An empty handle.
  PullSubscription empty;
  Outcome<Status> refused;
  empty.receive([p = refused.promise](const Status& s, Message) { p->set_value(s); });
  CHECK(refused.get() == errc::invalid_argument);
  CHECK(client.close_sync(5s) == std::error_code{});
  // Closed: what waits and what comes after get the end.
  CHECK(pull.receive_sync(5s).first == errc::closed);
}
