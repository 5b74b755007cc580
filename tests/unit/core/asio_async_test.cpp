// SPDX-License-Identifier: Apache-2.0
// polybus/asio/async.hpp: the client's operations with Asio completion tokens, over mem://.
// (The C++20 coroutine form is tests/install/consumer/coroutine_consumer.cpp.)
#include "polybus/asio/async.hpp"

#include <asio/bind_executor.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "polybus/polybus.hpp"

using namespace polybus;

namespace {
constexpr auto kBound = std::chrono::seconds(10);  // a failure bound, never a wait
}

TEST_CASE("asio tokens: use_future publishes and requests, with the values of the callbacks",
          "[asio_async]") {
  auto client = connect("mem://asio-future");
  std::promise<std::string> received;
  auto sub =
      client.subscribe("t", {}, [&](Message& m) { received.set_value(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kBound) == std::error_code{});
  auto responder = client.serve("q", [](Message& m) { return "re: " + std::string(m.payload()); });
  REQUIRE(responder.wait_ready(kBound) == std::error_code{});

  std::future<Status> published = async_publish(client, "t", "hello", asio::use_future);
  REQUIRE(published.wait_for(kBound) == std::future_status::ready);
  CHECK(published.get() == std::error_code{});
  auto got = received.get_future();
  REQUIRE(got.wait_for(kBound) == std::future_status::ready);
  CHECK(got.get() == "hello");

  std::future<Reply> replied = async_request(client, "q", "ping", asio::use_future);
  REQUIRE(replied.wait_for(kBound) == std::future_status::ready);
  const Reply reply = replied.get();
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "re: ping");

  std::future<Status> closed = async_close(client, std::chrono::seconds(5), asio::use_future);
  REQUIRE(closed.wait_for(kBound) == std::future_status::ready);
  CHECK(closed.get() == std::error_code{});
  // After the close, the same operation fails with its cause rather than throwing.
  std::future<Status> late = async_publish(client, "t", "late", asio::use_future);
  REQUIRE(late.wait_for(kBound) == std::future_status::ready);
  const Status refused = late.get();
  CHECK(refused.code() == errc::closed);
  CHECK_THAT(refused.cause(), Catch::Contains("closed"));
}

TEST_CASE("asio tokens: a failed request completes with its error and cause", "[asio_async]") {
  auto client = connect("mem://asio-failure");
  // Nobody serves "nobody": the request runs to its deadline.
  std::future<Reply> replied =
      async_request(client, "nobody", "x", std::chrono::milliseconds(50), asio::use_future);
  REQUIRE(replied.wait_for(kBound) == std::future_status::ready);
  const Reply reply = replied.get();
  CHECK(reply.ec);
  CHECK_THAT(reply.detail, Catch::Contains("nobody"));
}

TEST_CASE("asio tokens: deferred publishes nothing until the operation is launched",
          "[asio_async]") {
  auto client = connect("mem://asio-deferred");
  auto operation = async_publish(client, "t", "later", asio::experimental::deferred);
  CHECK(client.stats().published == 0);
  std::promise<Status> done;
  std::move(operation)([&](Status status) { done.set_value(std::move(status)); });
  auto result = done.get_future();
  REQUIRE(result.wait_for(kBound) == std::future_status::ready);
  CHECK(result.get() == std::error_code{});
  CHECK(client.stats().published == 1);
}

TEST_CASE(
    "asio tokens: a handler bound to the application's executor runs there, and keeps "
    "its io_context running until it has",
    "[asio_async]") {
  asio::io_context application;  // first: it must outlive the client, whose thread posts to it
  auto client = connect("mem://asio-executor");
  std::thread::id ran_on;
  Status result(make_error_code(errc::timeout), "not run");
  async_publish(client, "t", "x", asio::bind_executor(application, [&](Status status) {
                  ran_on = std::this_thread::get_id();
                  result = std::move(status);
                }));
  // No work guard of the test's own: run() returns only once the handler ran, because the
  // pending operation holds the io_context's work.
  application.run();
  CHECK(ran_on == std::this_thread::get_id());
  CHECK(result == std::error_code{});
}
