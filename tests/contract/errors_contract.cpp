// SPDX-License-Identifier: Apache-2.0
// Portable errors: the same failure gives the same polybus::errc condition on every scheme, and
// its Status names the cause (the operation, the endpoint, the limit, the server's words).
#include "contract.hpp"

#include <condition_variable>
#include <mutex>

using namespace polybus;
using namespace polybus::contract;

namespace {
// Every asynchronous error and state reason a client reported, with its text.
struct Reported {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Status> errors;
  ConnectOptions options(Options opts) {
    ConnectOptions o;
    o.options = std::move(opts);
    o.on_error = [this](std::error_code ec, const std::string& text) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.emplace_back(ec, text);
      cv.notify_all();
    };
    o.on_state = [this](const StateEvent& e) {
      if (!e.reason) return;
      std::lock_guard<std::mutex> lock(mutex);
      errors.emplace_back(e.reason, e.detail);
      cv.notify_all();
    };
    return o;
  }
  // Waits until an error of that condition whose cause holds those words was reported.
  bool wait_for(errc condition, const std::string& words) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, test::kWaitBound, [&] {
      for (const auto& s : errors)
        if (s == condition && s.cause().find(words) != std::string::npos) return true;
      return false;
    });
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out;
    for (const auto& s : errors) out += s.message() + "\n";
    return out;
  }
};
}  // namespace

CONTRACT_REQUEST_CASE(work_after_close_fails_with_closed_naming_the_operation) {
  auto client = env.connect();
  REQUIRE(client.close_sync(5s) == std::error_code{});
  if (env.caps.publish) {
    const Status s = client.publish_sync("after", "x");
    CHECK(s == errc::closed);
    CHECK_THAT(s.cause(), Catch::Contains("publish to after"));
  }
  if (env.caps.request_reply) {
    const Status s = client.request_sync("after", "x", 5s).status();
    CHECK(s == errc::closed);
    CHECK_FALSE(s.cause().empty());
  }
  Latch pinged;
  Status ping;
  client.ping([&](const Status& s) { ping = s, pinged.count_down(); });
  REQUIRE(pinged.wait_for(1));
  CHECK(ping == errc::closed);
  CHECK_THAT(ping.cause(), Catch::Contains("ping"));
}

CONTRACT_REQUEST_CASE(a_request_nobody_serves_fails_with_no_responder_or_at_its_deadline) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto client = env.connect();
  auto topic = unique_name("nobody");
  const Status s = client.request_sync(topic, "q", 500ms).status();
  INFO(s.message());
  // Where the protocol can tell nobody serves the topic it says so; elsewhere the deadline does.
  CHECK((s == errc::no_responder || s == errc::timeout));
  CHECK_FALSE(s.cause().empty());
}

CONTRACT_REQUEST_CASE(a_failing_handler_reaches_the_requester_as_handler_failed_with_its_words) {
  CONTRACT_REQUIRES(env.caps.request_reply && env.caps.reply_errors);
  auto server = env.connect();
  auto client = env.connect();
  auto topic = unique_name("boom");
  auto sub = server.serve(
      topic, [](Message&) -> std::string { throw std::runtime_error("the handler's own words"); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  const Status s = client.request_sync(topic, "q", 10s).status();
  INFO(s.message());
  CHECK(s == errc::handler_failed);
  CHECK_THAT(s.cause(), Catch::Contains("the handler's own words"));
}

CONTRACT_CASE(a_message_over_max_frame_size_is_reported_as_frame_too_large_naming_the_limit) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  CONTRACT_REQUIRES(env.url.rfind("mem://", 0) != 0);  // no wire, no frames
  Reported reported;
  Options small;
  small.set("max_frame_size", "1024");
  auto subscriber = polybus::connect(env.url, reported.options(small));
  auto publisher = env.connect();
  auto topic = unique_name("big");
  auto sub = subscriber.subscribe(topic, {}, [](Message& m) { m.ack(); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(publisher.publish_sync(topic, std::string(4096, 'x')) == std::error_code{});
  const bool named = reported.wait_for(errc::frame_too_large, "1024");
  INFO(reported.all());
  CHECK(named);
  sub.unsubscribe_sync(5s);
}

CONTRACT_CASE(publishes_faster_than_the_socket_drains_wait_for_room_and_all_complete) {
  CONTRACT_REQUIRES(env.caps.publish);
  // 2 MB published at once through a write queue of 64 KiB: publishes wait for room in the
  // queue. Were its bound to end the connection (and again after every reconnect), publishes
  // would fail for want of a connection.
  Options small;
  small.set("max_write_buffer", "65536");
  auto client = env.connect(small);
  auto topic = unique_name("flood");
  constexpr int kCount = 2000;
  Latch completed;
  std::mutex mutex;
  std::vector<std::string> failures;
  const std::string payload(1000, 'f');
  for (int i = 0; i < kCount; ++i)
    client.publish(topic, payload, [&](const Status& status) {
      if (status) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(status.message());
      }
      completed.count_down();
    });
  REQUIRE(completed.wait_for(kCount));
  std::lock_guard<std::mutex> lock(mutex);
  INFO((failures.empty() ? std::string() : failures.front()));
  CHECK(failures.empty());
  CHECK(client.stats().publish_acked == static_cast<std::uint64_t>(kCount));
}

CONTRACT_CASE(a_publish_that_would_not_fit_the_write_queue_is_refused_naming_the_limit) {
  CONTRACT_REQUIRES(env.caps.publish);
  CONTRACT_REQUIRES(env.url.rfind("mem://", 0) != 0);  // no wire, no write queue
  Options small;
  small.set("max_write_buffer", "65536");
  auto client = env.connect(small);
  const std::string topic = unique_name("big");
  const Status status = client.publish_sync(topic, std::string(40000, 'b'));
  CHECK(status.code() == errc::limit_exceeded);
  CHECK_THAT(status.message(), Catch::Contains("publish to " + topic) &&
                                   Catch::Contains("exceeds max_write_buffer/2=32768"));
  // The connection is not harmed: a publish that fits goes through.
  CHECK(client.publish_sync(topic, std::string(1000, 'b')) == std::error_code{});
}
