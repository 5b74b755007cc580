// SPDX-License-Identifier: Apache-2.0
// handler_thread=io: handlers run on the client's strand instead of handler threads.
#include <mutex>
#include <set>
#include <thread>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

Options handlers_on_io_thread() {
  Options options;
  options.set("handler_thread", "io");
  return options;
}

// Thread ids seen, from any thread.
class Threads {
 public:
  void add(std::thread::id id) {
    std::lock_guard<std::mutex> lock(mutex_);
    ids_.insert(id);
  }
  std::set<std::thread::id> ids() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ids_;
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::thread::id> ids_;
};

}  // namespace

CONTRACT_CASE(handlers_on_the_io_thread_get_every_message_one_at_a_time_and_settle_it) {
  CONTRACT_REQUIRES(env.caps.subscribe && env.caps.publish);
  constexpr int kCount = 500;
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Latch published;
  Threads handler_threads, completion_threads;
  std::atomic<int> running{0}, most{0};
  std::atomic<int> blocking_call{-1};  // what publish_sync said from inside a handler
  auto client = env.connect(handlers_on_io_thread());
  auto topic = unique_name("iothread");
  SubscribeOptions options;
  options.max_in_flight = 50;
  options.concurrency = 4;  // one at a time all the same: there is one io thread
  auto sub = client.subscribe(topic, options, [&](Message& m) {
    const int now = ++running;
    test::raise_to(most, now);
    handler_threads.add(std::this_thread::get_id());
    if (m.payload() == "0") blocking_call = client.publish_sync(topic + "-x", "inner").value();
    got.add(std::string(m.payload()));
    --running;
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  std::atomic<int> failures{0};
  for (int i = 0; i < kCount; ++i)
    client.publish(topic, std::to_string(i), [&](std::error_code ec) {
      if (ec) ++failures;
      completion_threads.add(std::this_thread::get_id());
      published.count_down();
    });
  REQUIRE(published.wait_for(kCount));
  CHECK(failures == 0);
  REQUIRE(got.wait_for_distinct(kCount));
  CHECK(most.load() == 1);
  CHECK(blocking_call == static_cast<int>(errc::would_block_io_thread));
  // Handlers and completions share the client's one io thread.
  CHECK(handler_threads.ids().size() == 1);
  CHECK(handler_threads.ids() == completion_threads.ids());
  if (env.caps.ordered_delivery) {
    auto order = got.order();
    for (int i = 0; i < kCount; ++i) REQUIRE(order[i] == std::to_string(i));
  }
  CHECK(client.close_sync(10s) == std::error_code{});
  if (env.caps.ack) CHECK(client.stats().acked == static_cast<std::uint64_t>(kCount));
}

CONTRACT_REQUEST_CASE(a_serve_handler_on_the_io_thread_answers_every_request) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  constexpr int kCount = 200;
  Latch answered, pinged;
  std::atomic<int> wrong{0};
  Threads handler_threads, completion_threads;
  auto server = env.connect(handlers_on_io_thread());
  auto client = env.connect();
  auto topic = unique_name("iorpc");
  auto sub = server.serve(topic, [&](Message& m) {
    handler_threads.add(std::this_thread::get_id());
    return "echo:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  server.ping([&](std::error_code) {
    completion_threads.add(std::this_thread::get_id());
    pinged.count_down();
  });
  REQUIRE(pinged.wait_for(1));
  for (int i = 0; i < kCount; ++i) {
    const std::string question = "q" + std::to_string(i);
    client.request(topic, question, RequestOptions{10s, {}}, [&, question](Reply reply) {
      if (reply.ec || reply.payload != "echo:" + question) ++wrong;
      answered.count_down();
    });
  }
  REQUIRE(answered.wait_for(kCount));
  CHECK(wrong == 0);
  CHECK(handler_threads.ids().size() == 1);
  CHECK(handler_threads.ids() == completion_threads.ids());  // the server's io thread
  CHECK(server.close_sync(10s) == std::error_code{});
}

CONTRACT_CASE(wait_ready_and_unsubscribe_sync_on_the_io_thread_are_refused_not_waited_out) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Latch done;
  Status waited, unsubscribed;
  auto client = env.connect();
  auto topic = unique_name("iowait");
  client.publish(topic, "x", [&](std::error_code) {
    // On the strand: the confirmation these would wait for comes there too.
    auto sub = client.subscribe(topic, {}, [](Message&) {});
    waited = sub.wait_ready(test::kWaitBound);
    unsubscribed = sub.unsubscribe_sync(test::kWaitBound);
    done.count_down();
  });
  REQUIRE(done.wait_for(1, 5s));
  CHECK(waited.code() == errc::would_block_io_thread);
  CHECK(unsubscribed.code() == errc::would_block_io_thread);
}
