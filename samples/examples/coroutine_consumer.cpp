// SPDX-License-Identifier: Apache-2.0
// C++20 coroutines on polybus's Asio face (polybus/asio/async.hpp), on one URL (mem:// by
// default; any scheme with publish, subscribe and request_reply):
//   - a consumer loop that pulls each message and settles it itself;
//   - a request/reply server that pulls each request and answers it;
//   - a requester that gives up a request at its deadline (the `||` of a timer).
// Prints what each step saw and exits 0 when each gave what it should.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "polybus/all.hpp"
#include "polybus/asio/async.hpp"

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr int kOrders = 5;

// Takes each order as it is ready for it; acks what it handled, nacks what it could not.
asio::awaitable<int> consume(polybus::PullSubscription orders) {
  int handled = 0;
  while (handled < kOrders) {
    auto [status, m] = co_await polybus::async_receive(orders, asio::use_awaitable);
    if (status) throw std::runtime_error("orders ended: " + status.message());
    std::cout << "consumed " << m.payload() << "\n";
    m.ack();  // an error here means the ack was not sent (a scheme without acks: not_supported)
    ++handled;
  }
  co_return handled;
}

// Answers each request it pulls, until the subscription ends.
asio::awaitable<void> serve(polybus::PullSubscription requests) {
  for (;;) {
    auto [status, m] = co_await polybus::async_receive(requests, asio::use_awaitable);
    if (status) co_return;                // unsubscribed or closed
    if (m.payload() == "slow") continue;  // left unanswered: its requester's deadline answers it
    m.reply("price of " + std::string(m.payload()) + ": 42");
  }
}

// Asks, and gives up at a deadline of its own.
asio::awaitable<void> ask(polybus::ClientRef client) {
  polybus::Reply reply =
      co_await polybus::async_request(client, "prices", "EURUSD", 5s, asio::use_awaitable);
  if (reply.ec) throw std::runtime_error("request: " + reply.status().message());
  std::cout << "replied " << reply.payload << "\n";
  asio::steady_timer deadline(co_await asio::this_coro::executor, 200ms);
  auto first =
      co_await (polybus::async_request(client, "prices", "slow", 30s, asio::use_awaitable) ||
                deadline.async_wait(asio::use_awaitable));
  if (first.index() != 1) throw std::runtime_error("the slow request was answered");
  std::cout << "gave up the slow request at its deadline\n";
}

}  // namespace

int main(int argc, char* argv[]) try {
  polybus::register_all_schemes();
  const std::string url = argc > 1 ? argv[1] : "mem://coroutines";
  asio::io_context io;  // first: it outlives the clients, whose io threads post into it
  auto client = polybus::connect(url);
  polybus::SubscribeOptions options;
  options.max_in_flight = 2;  // at most 2 unanswered from the broker at once
  polybus::PullSubscription orders = client.pull_subscribe("orders", options);
  polybus::PullSubscription requests = client.pull_serve("prices");
  for (const auto* pull : {&orders, &requests})
    if (auto status = pull->subscription().wait_ready(10s))
      throw std::runtime_error("subscription: " + status.message());
  for (int i = 0; i < kOrders; ++i)
    if (auto status = client.publish_sync("orders", "order-" + std::to_string(i)))
      throw std::runtime_error("publish: " + status.message());

  std::future<int> consumed = asio::co_spawn(io, consume(orders), asio::use_future);
  asio::co_spawn(io, serve(requests), asio::detached);
  std::future<void> asked = asio::co_spawn(io, ask(client), asio::use_future);
  // The coroutines run on a thread of their own; stopped and joined however main() leaves.
  struct Runner {
    asio::io_context& io;
    std::thread thread{[this] { io.run(); }};
    ~Runner() {
      io.stop();
      thread.join();
    }
  } runner{io};
  const int handled = consumed.get();
  asked.get();
  requests.subscription().unsubscribe();  // ends the server's loop
  if (auto status = client.close_sync(10s)) throw std::runtime_error("close: " + status.message());
  std::cout << "coroutines: ok (" << handled << " consumed)\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "coroutines: " << e.what() << "\n";
  return 1;
}
