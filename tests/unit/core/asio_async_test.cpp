// SPDX-License-Identifier: Apache-2.0
// polybus/asio/async.hpp: the client's operations with Asio completion tokens, over mem://.
// (The C++20 coroutine form is in tests/contract/asio_contract.cpp, on every broker.)
#include "polybus/asio/async.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

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

TEST_CASE("asio tokens: a completion the client gives during the initiation is posted",
          "[asio_async]") {
  // Through a reference whose client is gone the client completes at once, on the calling
  // thread; the handler must still not run inside async_publish (Asio's rule for initiations).
  asio::io_context io;
  ClientRef gone;
  {
    auto client = connect("mem://asio-inline");
    gone = client;
  }
  bool returned = false;
  bool ran_inside = false;
  std::optional<Status> result;
  asio::post(io, [&] {
    async_publish(gone, "t", "x", asio::bind_executor(io, [&](Status status) {
                    ran_inside = !returned;
                    result = std::move(status);
                  }));
    returned = true;
  });
  io.run_for(kBound);
  REQUIRE(result);
  CHECK(result->code() == errc::closed);
  CHECK(!ran_inside);
}

TEST_CASE("asio tokens: a cancellation racing the client's completion completes each once",
          "[asio_async]") {
  auto client = connect("mem://asio-race");
  auto responder = client.serve("q", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(responder.wait_ready(kBound) == std::error_code{});
  constexpr int kOperations = 300;
  std::atomic<int> completions{0};
  std::atomic<int> cancelled{0};
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  std::promise<void> all_done;
  const auto count = [&](bool was_cancelled) {
    if (was_cancelled) ++cancelled;
    if (++completions == 2 * kOperations) all_done.set_value();
  };
  for (int i = 0; i < kOperations; ++i) {
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    async_publish(client, "t", "x",
                  asio::bind_cancellation_slot(signals.back()->slot(), [&](Status status) {
                    count(status == errc::canceled);
                  }));
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    async_request(client, "q", "x", std::chrono::seconds(30),
                  asio::bind_cancellation_slot(signals.back()->slot(), [&](Reply reply) {
                    count(reply.ec == errc::canceled);
                  }));
  }
  // Emitted while the client completes them on its io thread: whichever comes first wins.
  for (auto& signal : signals) signal->emit(asio::cancellation_type::terminal);
  auto done = all_done.get_future();
  REQUIRE(done.wait_for(kBound) == std::future_status::ready);
  // Nothing completes twice, whatever the client does later (a flush settles every publish).
  CHECK(client.flush_sync(std::chrono::seconds(5)) == std::error_code{});
  CHECK(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
  CHECK(completions.load() == 2 * kOperations);
  INFO(cancelled.load() << " of " << 2 * kOperations << " won by the cancellation");
}

TEST_CASE(
    "a Cancellation gives a request up: unsent before it left, let go after, and a close "
    "does not wait for it",
    "[asio_async]") {
  auto client = connect("mem://cancellation");
  std::promise<void> taken;
  std::promise<void> release;
  auto released = release.get_future().share();
  auto responder = client.serve("slow", [&](Message& m) {
    taken.set_value();
    released.wait_for(kBound);
    return std::string(m.payload());
  });
  REQUIRE(responder.wait_ready(kBound) == std::error_code{});

  // Cancelled before it was made: it completes unsent.
  Cancellation before;
  before.cancel();
  CHECK(before.cancelled());
  RequestOptions unsent(std::chrono::seconds(30));
  unsent.cancellation = before;
  const Reply not_sent = client.request_sync("slow", "a", unsent);
  CHECK(not_sent.ec == errc::canceled);
  CHECK_THAT(not_sent.detail, Catch::Contains("not sent"));

  // Cancelled while its responder works: it completes at once, and the late reply is dropped.
  Cancellation during;
  RequestOptions sent(std::chrono::seconds(30));
  sent.cancellation = during;
  std::promise<Reply> outcome;
  std::atomic<int> completions{0};
  client.request("slow", "b", sent, [&](Reply reply) {
    if (++completions == 1) outcome.set_value(std::move(reply));
  });
  auto reached = taken.get_future();
  REQUIRE(reached.wait_for(kBound) == std::future_status::ready);
  during.cancel();
  auto result = outcome.get_future();
  REQUIRE(result.wait_for(kBound) == std::future_status::ready);
  const Reply given_up = result.get();
  CHECK(given_up.ec == errc::canceled);
  CHECK_THAT(given_up.detail, Catch::Contains("reply is dropped"));
  // The close does not wait for the request (its deadline is 30 s): only for the handler.
  release.set_value();
  CHECK(client.close_sync(std::chrono::seconds(20)) == std::error_code{});
  CHECK(completions.load() == 1);
}
