// SPDX-License-Identifier: Apache-2.0
// Behaviour of the client front that every adapter shares, exercised over mem://.
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "polybus/adapter/registry.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

TEST_CASE("connect rejects an unknown scheme and names the registered ones", "[client]") {
  try {
    connect("nope://host:1");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == errc::unknown_scheme);
    CHECK(std::string(e.what()).find("mem") != std::string::npos);
  }
}

TEST_CASE("connect rejects bad options in the URL and in ConnectOptions", "[client]") {
  CHECK_THROWS_AS(connect("mem://x?max_in_flight=abc"), Error);
  CHECK_THROWS_AS(connect("mem://x?unknown=1"), Error);
  ConnectOptions options;
  options.options.set("op_timeout", "-5");
  CHECK_THROWS_AS(connect("mem://x", options), Error);
  CHECK_THROWS_AS(connect("mem://x:123"), Error);
  CHECK_THROWS_AS(connect("mem://a,b"), Error);
}

TEST_CASE("an empty client handle throws instead of crashing", "[client]") {
  Client empty;
  CHECK_FALSE(empty);
  CHECK_THROWS_AS(empty.publish("t", "x", nullptr), Error);
}

TEST_CASE("state events report connected and closed", "[client]") {
  std::mutex mutex;
  std::vector<ConnectionState> states;
  Latch closed;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    std::lock_guard<std::mutex> lock(mutex);
    states.push_back(e.state);
    if (e.state == ConnectionState::closed) closed.count_down();
  };
  auto client = connect("mem://" + unique_name("states"), options);
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  REQUIRE(client.close_sync(5s) == std::error_code{});
  REQUIRE(closed.wait_for(1));
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(std::find(states.begin(), states.end(), ConnectionState::connected) != states.end());
  CHECK(states.back() == ConnectionState::closed);
}

TEST_CASE("a handler that throws is reported through the error callback", "[client]") {
  Latch reported;
  std::string message;
  std::error_code code;
  ConnectOptions options;
  options.on_error = [&](std::error_code ec, const std::string& text) {
    if (ec == errc::handler_failed && message.empty()) {
      code = ec;
      message = text;
      reported.count_down();
    }
  };
  options.options.set("requeue_delay", "0");
  auto client = connect("mem://" + unique_name("errors"), options);
  std::atomic<int> calls{0};
  auto sub = client.subscribe("t", {}, [&](Message&) {
    if (++calls == 1) throw std::runtime_error("bad payload");
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  REQUIRE(reported.wait_for(1));
  CHECK(message.find("bad payload") != std::string::npos);
  CHECK(message.find("t") != std::string::npos);
}

TEST_CASE("a completion that throws is reported, and the client carries on", "[client]") {
  // Completions run on the io thread, inside the adapter's handling of the broker's answer: an
  // exception let through would unwind the adapter's state and end the process.
  std::mutex mutex;
  std::vector<std::string> reports;
  Latch reported;
  ConnectOptions options;
  options.on_error = [&](std::error_code ec, const std::string& text) {
    if (ec != errc::handler_failed) return;
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(text);
    reported.count_down();
  };
  auto client = connect("mem://" + unique_name("throwing"), options);
  client.publish("t", "x", [](const Status&) { throw std::runtime_error("publish callback bug"); });
  client.ping([](const Status&) { throw 42; });
  REQUIRE(reported.wait_for(2));
  {
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(reports.size() == 2);
    CHECK_THAT(reports[0], Catch::Contains("publish") && Catch::Contains("publish callback bug"));
    CHECK_THAT(reports[1], Catch::Contains("ping") && Catch::Contains("non-standard exception"));
  }
  CHECK(client.publish_sync("t", "y") == std::error_code{});  // still serving
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE("a request made after close() on the same thread fails as closed, even behind a publish",
          "[client]") {
  // Publishes and requests wait in one intake, drained by one post per burst. A close posted
  // while a drain is queued must not let a later request join that drain and go out first.
  const std::string name = unique_name("order");
  auto responder = connect("mem://" + name);
  auto serving = responder.serve("svc", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  auto client = connect("mem://" + name);
  std::promise<Reply> replied;
  Latch closed;
  // Inside a completion the strand is busy: everything below is queued behind it, in order.
  client.publish("warm", "up", [&](const Status&) {
    client.publish("t", "queued first", nullptr);  // posts the drain
    client.close(kWaitBound, [&](const Status&) { closed.count_down(); });
    client.request("svc", "after close", [&](Reply reply) { replied.set_value(std::move(reply)); });
  });
  auto reply = replied.get_future();
  REQUIRE(reply.wait_for(kWaitBound) == std::future_status::ready);
  CHECK(reply.get().ec == errc::closed);
  REQUIRE(closed.wait_for(1));
}

TEST_CASE("handlers run off the io thread, completions on it", "[client]") {
  auto client = connect("mem://" + unique_name("threads"));
  std::thread::id completion_thread, handler_thread;
  Latch both;
  auto sub = client.subscribe("t", {}, [&](Message&) {
    handler_thread = std::this_thread::get_id();
    both.count_down();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  client.publish("t", "x", [&](std::error_code) {
    completion_thread = std::this_thread::get_id();
    both.count_down();
  });
  REQUIRE(both.wait_for(2));
  CHECK(handler_thread != completion_thread);
  CHECK(handler_thread != std::this_thread::get_id());
}

TEST_CASE("a caller-supplied io_context runs the client", "[client]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  {
    ConnectOptions options;
    options.io_context = &io;
    auto client = connect("mem://" + unique_name("userio"), options);
    std::thread::id completion_thread;
    std::error_code result;
    Latch done;
    client.publish("t", "x", [&](std::error_code ec) {
      result = ec;
      completion_thread = std::this_thread::get_id();
      done.count_down();
    });
    REQUIRE(done.wait_for(1));
    CHECK(result == std::error_code{});
    CHECK(completion_thread == runner.get_id());
    CHECK(client.close_sync(5s) == std::error_code{});
  }
  guard.reset();
  runner.join();
}

TEST_CASE("dropping the last handle closes the client and completes its operations", "[client]") {
  Latch done;
  {
    auto client = connect("mem://" + unique_name("drop"));
    for (int i = 0; i < 100; ++i)
      client.publish("t", "x", [&](std::error_code) { done.count_down(); });
  }
  CHECK(done.count() == 100);
}

TEST_CASE("a client dropped inside its own completion does not deadlock", "[client]") {
  Latch done;
  auto client = std::make_shared<Client>(connect("mem://" + unique_name("selfdrop")));
  auto holder = client;
  client->publish("t", "x", [&done, holder](std::error_code) mutable { done.count_down(); });
  client.reset();
  holder.reset();  // the completion lambda holds the last copy: it is dropped on the io thread
  REQUIRE(done.wait_for(1));
}

TEST_CASE("log lines reach the sink at or above the chosen level", "[client]") {
  std::mutex mutex;
  std::vector<std::string> lines;
  ConnectOptions options;
  options.log_level = LogLevel::debug;
  options.log = [&](LogLevel, std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.emplace_back(text);
  };
  auto client = connect("mem://" + unique_name("log"), options);
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  client.close_sync(5s);
  std::lock_guard<std::mutex> lock(mutex);
  CHECK_FALSE(lines.empty());
}

TEST_CASE("a message can be responded to only once", "[client]") {
  auto client = connect("mem://" + unique_name("once"));
  Latch done;
  std::error_code first, second, third;
  auto sub = client.subscribe("t", {}, [&](Message& m) {
    first = m.ack();
    second = m.ack();
    third = m.nack(std::chrono::milliseconds(0));
    done.count_down();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  REQUIRE(done.wait_for(1));
  CHECK(first == std::error_code{});
  CHECK(second == errc::already_responded);
  CHECK(third == errc::already_responded);
}

TEST_CASE("statistics count publishes, deliveries and bytes", "[client]") {
  auto client = connect("mem://" + unique_name("stats"));
  Collector got;
  auto sub = client.subscribe("t", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 5; ++i) REQUIRE(client.publish_sync("t", "12345") == std::error_code{});
  REQUIRE(got.wait_for_count(5));
  auto s = client.stats();
  CHECK(s.published == 5);
  CHECK(s.publish_acked == 5);
  CHECK(s.received == 5);
  CHECK(s.bytes_out == 25);
  CHECK(s.bytes_in == 25);
}

namespace {
// Registers an adapter class of this file under a scheme of its own.
template <typename AdapterT>
void register_test_adapter(const char* scheme, const char* summary) {
  SchemeInfo info;
  info.scheme = scheme;
  info.summary = summary;
  info.options = core_option_table();
  info.capabilities = AdapterT::caps();
  info.factory = [](AdapterContext& ctx) -> std::unique_ptr<Adapter> {
    return std::make_unique<AdapterT>(ctx);
  };
  register_scheme(std::move(info));
}

// A test adapter that publishes and answers requests, and cannot subscribe.
class NoSubscribeAdapter : public Adapter {
 public:
  static Capabilities caps() {
    Capabilities caps;
    caps.publish = caps.publish_confirmed = true;
    caps.request_reply = caps.reply_errors = true;
    return caps;
  }
  Capabilities capabilities() const override { return caps(); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink>) override {
    return nullptr;
  }
};

// An adapter that throws while taking some publishes and requests (a bug, or a value it cannot
// take) and completes the others at once.
class ThrowingAdapter : public NoSubscribeAdapter {
 public:
  explicit ThrowingAdapter(const AdapterContext&) {}
  void publish(PublishWork work) override {
    if (work.topic == "refused")
      throw Error(errc::frame_too_large, "payload over the adapter's bound");
    if (work.topic == "bug") throw std::runtime_error("adapter bug");
    work.done({});
  }
  void request(RequestWork work) override {
    if (work.topic == "stored-then-threw") {
      kept_ = std::move(work.done);  // made its own, then failed: completes once all the same
      throw std::bad_alloc();
    }
    work.done({}, "pong");
  }
  void close(Clock::time_point, std::function<void()> done) override {
    if (kept_) kept_({}, "late");  // too late: the operation completed when the adapter threw
    done();
  }

 private:
  OpCompletion kept_;
};
}  // namespace

TEST_CASE("a publish or request whose adapter throws completes at once with the exception's cause",
          "[client]") {
  register_test_adapter<ThrowingAdapter>("throwing-test", "unit test: an adapter that throws");
  auto client = connect("throwing-test://x?op_timeout=1h");  // a deadline no test waits for
  // Each waits kWaitBound at most: completed at their deadline instead, they would take an hour.
  auto publish = [&](const std::string& topic) {
    auto result = std::make_shared<std::promise<Status>>();
    auto done = result->get_future();
    PublishOptions within_an_hour;
    within_an_hour.timeout = std::chrono::hours(1);
    client.publish(topic, "x", within_an_hour, [result](const Status& s) { result->set_value(s); });
    REQUIRE(done.wait_for(kWaitBound) == std::future_status::ready);
    return done.get();
  };
  const Status refused = publish("refused");
  CHECK(refused.code() == errc::frame_too_large);
  CHECK_THAT(refused.cause(), Catch::Contains("publish to refused") &&
                                  Catch::Contains("payload over the adapter's bound"));
  const Status bug = publish("bug");
  CHECK(bug.code() == errc::invalid_argument);
  CHECK_THAT(bug.cause(), Catch::Contains("adapter bug"));
  auto result = std::make_shared<std::promise<Reply>>();
  auto replied = result->get_future();
  auto calls = std::make_shared<std::atomic<int>>(0);
  client.request("stored-then-threw", "x", std::chrono::hours(1), [result, calls](Reply r) {
    if (calls->fetch_add(1) == 0) result->set_value(std::move(r));
  });
  REQUIRE(replied.wait_for(kWaitBound) == std::future_status::ready);
  const Reply stored = replied.get();
  CHECK(stored.ec == std::errc::not_enough_memory);
  CHECK_THAT(stored.detail, Catch::Contains("request to stored-then-threw"));
  // The others still go, before and after.
  CHECK(client.publish_sync("fine", "x") == std::error_code{});
  CHECK(client.request_sync("fine", "x").payload == "pong");
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
  CHECK(calls->load() == 1);  // the adapter's late completion at close() found it done
}

namespace {
// Whether the last AlreadySentAdapter subscription the client told to pause or resume is paused.
std::atomic<bool> already_sent_paused{false};

// A broker that had already sent: its subscriptions deliver every publish to their topic at once,
// paused or not, the way messages on the wire still arrive after a pause was sent.
class AlreadySentAdapter : public Adapter {
 public:
  explicit AlreadySentAdapter(AdapterContext ctx) : ctx_(std::move(ctx)) {}
  static Capabilities caps() {
    Capabilities caps;
    caps.publish = caps.subscribe = caps.publish_confirmed = true;
    return caps;
  }
  Capabilities capabilities() const override { return caps(); }
  void publish(PublishWork work) override {
    for (const auto& sink : sinks_) {
      auto state = ctx_.make_message({});
      state->topic = work.topic;
      auto payload = std::make_shared<std::string>(work.payloads.front());
      state->payload = *payload;
      state->buffer = std::move(payload);
      sink->deliver(Message(std::move(state)));
    }
    work.done({});
  }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    sink->ready({});
    sinks_.push_back(std::move(sink));
    return std::make_shared<Deaf>();
  }
  void close(Clock::time_point, std::function<void()> done) override { done(); }

 private:
  struct Deaf : AdapterSubscription {
    void unsubscribe(OpCompletion done) override { done({}); }
    void pause() override { already_sent_paused = true; }
    void resume() override { already_sent_paused = false; }
    void set_max_in_flight(std::uint32_t) override {}
  };
  AdapterContext ctx_;
  std::vector<std::shared_ptr<SubscriptionSink>> sinks_;
};
}  // namespace

TEST_CASE("a paused subscription holds what arrives until resume, and a close drains it",
          "[client]") {
  register_test_adapter<AlreadySentAdapter>(
      "already-sent-test", "unit test: a broker that delivers whether paused or not");
  // Declared before the client: handlers may still run while it closes.
  Collector got, witness;
  auto client = connect("already-sent-test://x");
  auto collect = [](Collector& into) {
    return [&into](Message& m) { into.add(std::string(m.payload())); };
  };
  auto sub = client.subscribe("t", {}, collect(got));
  auto other = client.subscribe("t", {}, collect(witness));
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(other.wait_ready(kWaitBound) == std::error_code{});
  sub.pause();
  REQUIRE(client.publish_sync("t", "held") == std::error_code{});
  REQUIRE(client.publish_sync("t", "held2") == std::error_code{});
  REQUIRE(witness.wait_for_distinct(2));
  CHECK(got.total() == 0);
  CHECK(sub.pending() == 2);
  sub.resume();
  REQUIRE(got.wait_for_distinct(2));
  CHECK(got.order() == std::vector<std::string>{"held", "held2"});
  sub.pause();
  REQUIRE(client.publish_sync("t", "at-close") == std::error_code{});
  REQUIRE(witness.wait_for_distinct(3));
  CHECK(got.count("at-close") == 0);
  // Unsubscribing gives back what the pause held: nothing waits for a handler after it.
  auto third = client.subscribe("t", {}, [](Message&) {});
  REQUIRE(third.wait_ready(kWaitBound) == std::error_code{});
  third.pause();
  REQUIRE(client.publish_sync("t", "given-back") == std::error_code{});
  CHECK(third.pending() == 1);
  CHECK(third.unsubscribe_sync(kWaitBound) == std::error_code{});
  CHECK(third.pending() == 0);
  // Closing drains: what the pause held is handled, not left behind.
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
  CHECK(got.count("at-close") == 1);
}

TEST_CASE("a pause from a handler holds back what its thread took with that message, in order",
          "[client]") {
  // A handler thread takes several queued messages under one lock; those it took and has not
  // handled when a handler pauses go back to the front of the queue.
  register_test_adapter<AlreadySentAdapter>(
      "already-sent-test", "unit test: a broker that delivers whether paused or not");
  Collector got;
  auto client = connect("already-sent-test://x");
  Subscription* self = nullptr;
  std::atomic<std::size_t> pending_in_first{0};
  auto sub = client.subscribe("t", {}, [&](Message& m) {
    got.add(std::string(m.payload()));
    if (m.payload() != "m0") return;
    pending_in_first = self->pending();  // the one running and those taken with it
    self->pause();
  });
  self = &sub;
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  constexpr int kCount = 10;
  sub.pause();
  for (int i = 0; i < kCount; ++i)
    REQUIRE(client.publish_sync("t", "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(sub.pending() == kCount);
  sub.resume();  // one handler thread takes the ten at once and handles m0, which pauses
  REQUIRE(got.wait_for_count(1));
  CHECK(eventually([&] { return sub.pending() == kCount - 1; }));
  CHECK(pending_in_first.load() == kCount);
  CHECK(got.total() == 1);
  sub.resume();
  REQUIRE(got.wait_for_count(kCount));
  std::vector<std::string> expected;
  for (int i = 0; i < kCount; ++i) expected.push_back("m" + std::to_string(i));
  CHECK(got.order() == expected);
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE(
    "messages a handler thread took together stay in the budget until handled: delivery stays "
    "paused",
    "[client][flow]") {
  // Messages queued while the application paused are taken together by the one handler thread
  // once it resumes, and it blocks in the first: those it took still wait for a handler, so
  // they count against max_held_messages=4 with what the queue holds.
  register_test_adapter<AlreadySentAdapter>(
      "already-sent-test", "unit test: a broker that delivers whether paused or not");
  std::promise<void> gate;
  auto gate_open = gate.get_future().share();
  Latch entered;
  std::atomic<int> handled{0};
  auto client = connect("already-sent-test://x?max_held_messages=4");
  auto sub = client.subscribe("t", {}, [&](Message&) {
    if (handled.fetch_add(1) == 0) {
      entered.count_down();
      gate_open.wait();
    }
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  auto publish = [&](const std::string& payload) {
    REQUIRE(client.publish_sync("t", payload) == std::error_code{});
  };
  int published = 0;
  sub.pause();
  SECTION("taking them does not end the budget's pause") {
    for (; published < 10; ++published) publish("m" + std::to_string(published));
    sub.resume();
    REQUIRE(entered.wait_for(1));
    // A publish passes through the client's strand after anything the take posted there; it
    // is delivered too, behind the others.
    publish("after");
    ++published;
    CHECK(already_sent_paused.load());
    CHECK(sub.pending() == 11);  // the one running, nine taken with it, and "after"
  }
  SECTION("what arrives while they wait is counted with them") {
    for (; published < 4; ++published) publish("m" + std::to_string(published));
    sub.resume();
    REQUIRE(entered.wait_for(1));
    // Four held, within the budget: the resume reaches the broker's side.
    REQUIRE(eventually([&] { return !already_sent_paused.load(); }));
    publish("a");
    publish("b");
    published += 2;
    CHECK(already_sent_paused.load());  // three taken and two queued wait: over four
    CHECK(sub.pending() == 6);
  }
  gate.set_value();
  CHECK(eventually([&] { return handled.load() == published; }));
  CHECK(eventually([&] { return !already_sent_paused.load(); }));
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE(
    "messages queued before the handler threads woke still run as many at once as the "
    "concurrency allows",
    "[client]") {
  // A handler thread that took several queued messages at once would keep them from the other
  // threads: here each handler waits until all four run together.
  register_test_adapter<AlreadySentAdapter>(
      "already-sent-test", "unit test: a broker that delivers whether paused or not");
  constexpr int kConcurrency = 4;
  Latch running;
  std::atomic<int> together{0};
  auto client = connect("already-sent-test://x");
  SubscribeOptions options;
  options.concurrency = kConcurrency;
  auto sub = client.subscribe("t", options, [&](Message&) {
    running.count_down();
    if (running.wait_for(kConcurrency)) ++together;
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  sub.pause();
  for (int i = 0; i < kConcurrency; ++i)
    REQUIRE(client.publish_sync("t", "m" + std::to_string(i)) == std::error_code{});
  sub.resume();
  REQUIRE(running.wait_for(kConcurrency));
  CHECK(eventually([&] { return together.load() == kConcurrency; }));
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

namespace {
// A broker that confirms nothing until told: publishes to "release" complete every one held.
class HoldingAdapter : public NoSubscribeAdapter {
 public:
  explicit HoldingAdapter(const AdapterContext&) {}
  void publish(PublishWork work) override {
    if (work.topic != "release") return held_.push_back(std::move(work.done));
    for (auto& done : held_) done({});
    held_.clear();
    work.done({});
  }
  void request(RequestWork work) override { held_.push_back(std::move(work.done)); }
  void close(Clock::time_point, std::function<void()> done) override {
    for (auto& held : held_) held(make_error_code(errc::closed));
    held_.clear();
    done();
  }

 private:
  std::vector<OpCompletion> held_;
};
}  // namespace

TEST_CASE("publishes and requests past max_outgoing_bytes are refused at once, naming the bound",
          "[client]") {
  register_test_adapter<HoldingAdapter>("holding-test",
                                        "unit test: a broker that confirms only when told");
  auto client = connect("holding-test://x?max_outgoing_bytes=1024");
  const std::string part(400, 'p');
  Latch first_two;
  std::atomic<int> first_two_failed{0};
  for (int i = 0; i < 2; ++i)
    client.publish("t", part, [&](std::error_code ec) {
      if (ec) ++first_two_failed;
      first_two.count_down();
    });
  // 800 held: 400 more would be 1200.
  const Status over = client.publish_sync("t", part);
  CHECK(over.code() == errc::limit_exceeded);
  CHECK_THAT(over.cause(), Catch::Contains("publish to t") && Catch::Contains("1200") &&
                               Catch::Contains("max_outgoing_bytes=1024"));
  const Reply refused = client.request_sync("t", part, 5s);
  CHECK(refused.ec == errc::limit_exceeded);
  CHECK_THAT(refused.detail, Catch::Contains("request to t") && Catch::Contains("1200"));
  CHECK(first_two.count() == 0);  // the two taken still wait: a refusal completes only itself
  // What completes gives its bytes back.
  REQUIRE(client.publish_sync("release", "") == std::error_code{});
  REQUIRE(first_two.wait_for(2));
  CHECK(first_two_failed == 0);
  Latch later;
  std::error_code later_ec = make_error_code(errc::timeout);
  client.publish("t", part, [&](std::error_code ec) {
    later_ec = ec;
    later.count_down();
  });
  client.publish("t", part, nullptr);
  REQUIRE(client.publish_sync("release", "") == std::error_code{});
  REQUIRE(later.wait_for(1));
  CHECK(later_ec == std::error_code{});
  CHECK(client.stats().publish_failed == 1);
}

TEST_CASE("slow handlers on the io thread give up their turn to the client's other work",
          "[client]") {
  // A queue of handlers on the io thread runs in turns of at most about a millisecond of
  // handling (and 64 messages): between turns, the writes they made (acks, publishes) leave and
  // reads and completions run. Each handler here takes 2 ms (its work, not a wait for anything),
  // so a turn is two of them; the first handler's publish completes long before the last one.
  constexpr int kCount = 40;  // under the 64 a turn may take
  std::atomic<int> handled{0}, handled_when_confirmed{-1};
  Latch all, confirmed;
  auto client = connect("mem://" + unique_name("turns") + "?handler_thread=io");
  auto sub = client.subscribe("slow", {}, [&](Message&) {
    if (handled.load() == 0)
      client.publish("elsewhere", "x", [&](std::error_code) {
        handled_when_confirmed = handled.load();
        confirmed.count_down();
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++handled;
    all.count_down();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  sub.pause();  // held until resume(), then handed to the handler at once
  for (int i = 0; i < kCount; ++i)
    REQUIRE(client.publish_sync("slow", std::to_string(i)) == std::error_code{});
  sub.resume();
  REQUIRE(all.wait_for(kCount));
  REQUIRE(confirmed.wait_for(1));
  INFO("handlers done when the first one's publish completed: " << handled_when_confirmed.load());
  CHECK(handled_when_confirmed.load() < kCount / 2);
}
