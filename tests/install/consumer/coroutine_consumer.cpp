// SPDX-License-Identifier: Apache-2.0
// A C++20 application: one coroutine publishes, requests and closes through polybus's Asio
// completion tokens (polybus/asio/async.hpp) with asio::use_awaitable, against mem://. Prints
// "coroutine: ok" and exits 0 when every step gave what it should.
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <future>
#include <iostream>
#include <polybus/all.hpp>
#include <polybus/asio/async.hpp>

namespace {

asio::awaitable<std::string> exercise(polybus::ClientRef client) {
  polybus::Status published =
      co_await polybus::async_publish(client, "greetings", "hello", asio::use_awaitable);
  if (published) co_return "publish: " + published.message();
  polybus::Reply reply =
      co_await polybus::async_request(client, "echo", "ping", asio::use_awaitable);
  if (reply.ec) co_return "request: " + reply.status().message();
  if (reply.payload != "pong: ping") co_return "request answered '" + reply.payload + "'";
  polybus::Status closed =
      co_await polybus::async_close(client, std::chrono::seconds(5), asio::use_awaitable);
  if (closed) co_return "close: " + closed.message();
  co_return "";
}

}  // namespace

int main() {
  polybus::register_all_schemes();
  asio::io_context io;  // first: it must outlive the client, whose io thread posts to it
  auto client = polybus::connect("mem://coroutine");
  std::promise<std::string> received;
  auto sub = client.subscribe(
      "greetings", {}, [&](polybus::Message& m) { received.set_value(std::string(m.payload())); });
  auto responder =
      client.serve("echo", [](polybus::Message& m) { return "pong: " + std::string(m.payload()); });
  if (sub.wait_ready(std::chrono::seconds(10)) || responder.wait_ready(std::chrono::seconds(10))) {
    std::cerr << "subscriptions not ready\n";
    return 1;
  }
  std::future<std::string> failure = asio::co_spawn(io, exercise(client), asio::use_future);
  io.run();
  const std::string what = failure.get();
  if (!what.empty()) {
    std::cerr << "coroutine: " << what << "\n";
    return 1;
  }
  auto got = received.get_future();
  if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready || got.get() != "hello") {
    std::cerr << "coroutine: the subscriber did not receive what it published\n";
    return 1;
  }
  std::cout << "coroutine: ok\n";
  return 0;
}
