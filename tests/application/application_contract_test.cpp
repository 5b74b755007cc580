// SPDX-License-Identifier: Apache-2.0
// The contract between polybus and the application (docs/abstraction.md, "Threads and
// ownership"), tried the way ordinary programs use the client: their own io_context, handlers
// that publish and close, callbacks without locks of their own, and code that throws.
#include <sys/wait.h>

#include <algorithm>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "child_programs.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/middleware.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

namespace {

// An application's io_context run by `threads` threads of its own until the object goes.
class AppIoContext {
 public:
  explicit AppIoContext(int threads) : guard_(asio::make_work_guard(io)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io.run(); });
  }
  ~AppIoContext() {
    guard_.reset();
    for (auto& thread : threads_) thread.join();
  }
  // Runs fn on one of the io_context's threads; its result, or nothing past the bound.
  template <typename Fn>
  auto run_on_io(Fn fn, std::chrono::milliseconds bound = kWaitBound)
      -> std::optional<decltype(fn())> {
    auto result = std::make_shared<std::promise<decltype(fn())>>();
    auto future = result->get_future();
    asio::post(io, [result, fn = std::move(fn)]() mutable { result->set_value(fn()); });
    if (future.wait_for(bound) != std::future_status::ready) return std::nullopt;
    return future.get();
  }
  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

// The process's threads now (/proc/self/status).
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

ConnectOptions on(AppIoContext& app) {
  ConnectOptions options;
  options.io_context = &app.io;
  return options;
}

}  // namespace

// ---- 1. No call that waits can deadlock ----

TEST_CASE("every waiting call on a thread of the application's io_context returns would_block",
          "[application][blocking]") {
  // Two threads: the strand could run on the other one, and still no thread of the io_context
  // may wait there (with one thread, it would wait for itself for ever).
  AppIoContext app(2);
  Client client = connect("mem://" + unique_name("app-io-block"), on(app));
  auto sub = client.subscribe("t", {}, [](Message&) {});
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  ClientRef ref = client;
  auto codes = app.run_on_io([ref, sub]() mutable {
    std::vector<Status> results;
    results.push_back(ref.publish_sync("t", "x"));
    results.push_back(ref.flush_sync(std::chrono::seconds(5)));
    results.push_back(ref.request_sync("t", "x").status());
    results.push_back(sub.unsubscribe_sync(std::chrono::seconds(5)));
    results.push_back(ref.close_sync(std::chrono::seconds(5)));
    return results;
  });
  REQUIRE(codes);
  for (const auto& status : *codes) {
    CHECK(status.code() == errc::would_block_io_thread);
    CHECK_THAT(status.cause(), Catch::Contains("io_context"));
  }
  CHECK(sub.active());  // nothing was done
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE("publish_sync from the only thread of the application's io_context does not deadlock",
          "[application][blocking]") {
  AppIoContext app(1);
  Client client = connect("mem://" + unique_name("app-io-one"), on(app));
  ClientRef ref = client;
  auto code = app.run_on_io([ref]() mutable { return ref.publish_sync("t", "x"); });
  if (!code) {
    // The io thread waits for itself: nothing can free it, so the process ends here.
    FAIL_CHECK("publish_sync on the io_context's only thread did not return");
    std::abort();
  }
  CHECK(code->code() == errc::would_block_io_thread);
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

namespace {
// A broker that never answers a subscribe: its subscriptions stay unconfirmed.
class SilentAdapter : public Adapter {
 public:
  explicit SilentAdapter(const AdapterContext&) {}
  static Capabilities caps() {
    Capabilities caps;
    caps.publish = caps.subscribe = true;
    return caps;
  }
  Capabilities capabilities() const override { return caps(); }
  void publish(PublishWork work) override { work.done({}); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    sinks_.push_back(std::move(sink));
    return nullptr;
  }
  void close(Clock::time_point, std::function<void()> done) override { done(); }

 private:
  std::vector<std::shared_ptr<SubscriptionSink>> sinks_;
};

template <typename AdapterT>
void register_test_scheme(const char* scheme) {
  SchemeInfo info;
  info.scheme = scheme;
  info.summary = "application test adapter";
  info.options = core_option_table();
  info.capabilities = AdapterT::caps();
  info.factory = [](AdapterContext& ctx) -> std::unique_ptr<Adapter> {
    return std::make_unique<AdapterT>(ctx);
  };
  register_scheme(std::move(info));
}
}  // namespace

TEST_CASE("wait_ready on a thread of the application's io_context does not wait",
          "[application][blocking]") {
  register_test_scheme<SilentAdapter>("silent-test");
  AppIoContext app(2);
  Client client = connect("silent-test://x", on(app));
  auto sub = client.subscribe("t", {}, [](Message&) {});
  auto code = app.run_on_io([sub] { return sub.wait_ready(std::chrono::seconds(30)); },
                            std::chrono::seconds(10));
  REQUIRE(code);
  CHECK(code->code() == errc::would_block_io_thread);
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE(
    "close_sync from a message handler does not wait for that handler, whose message is "
    "settled as it returns",
    "[application][blocking]") {
  Client client = connect("mem://" + unique_name("close-in-handler") + "?close_timeout=30s");
  std::promise<Status> closed_in_handler;
  auto sub = client.subscribe("t", {}, [&](Message& m) {
    closed_in_handler.set_value(m.client().close_sync(std::chrono::seconds(30)));
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "last") == std::error_code{});
  auto result = closed_in_handler.get_future();
  // Well inside the close's 30 s: a close_sync that waited for its own handler would be there.
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(result.get() == std::error_code{});
  CHECK(eventually([&] { return !sub.active(); }));
  CHECK(client.stats().acked == 1);
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE("unsubscribe_sync from the subscription's own handler does not wait for that handler",
          "[application][blocking]") {
  Client client = connect("mem://" + unique_name("unsub-in-handler") + "?op_timeout=30s");
  std::promise<Status> unsubscribed;
  std::promise<Subscription> own;
  auto own_sub = own.get_future().share();
  auto sub = client.subscribe("t", {}, [&](Message&) {
    Subscription self = own_sub.get();
    unsubscribed.set_value(self.unsubscribe_sync(std::chrono::seconds(30)));
  });
  own.set_value(sub);
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "x") == std::error_code{});
  auto result = unsubscribed.get_future();
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(result.get() == std::error_code{});
  CHECK_FALSE(sub.active());
  CHECK(eventually([&] { return client.stats().acked == 1; }));
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

// ---- 2. Handles never stall or outlive safely ----

TEST_CASE("dropping the last Client on a thread of its io_context returns at once",
          "[application][ownership]") {
  AppIoContext app(1);
  StateRecorder states;
  ConnectOptions options = on(app);
  options.on_state = states.callback();
  auto client = std::make_shared<std::optional<Client>>(
      connect("mem://" + unique_name("drop-on-io") + "?close_timeout=30s", options));
  // A handler that holds the close up: the drain waits for it, up to close_timeout.
  Gate gate;
  Latch entered;
  auto sub = (*client)->subscribe("t", {}, [&](Message&) {
    entered.count_down();
    gate.wait();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  (*client)->publish("t", "x", {});
  REQUIRE(entered.wait_for(1));
  // Well inside close_timeout: a destructor that waited for the drain would still be waiting.
  auto dropped = app.run_on_io(
      [client] {
        client->reset();
        return true;
      },
      std::chrono::seconds(10));
  CHECK(dropped);
  gate.open();
  CHECK(states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::closed && e.endpoint.empty();
  }));
  if (!dropped) app.run_on_io([] { return true; }, std::chrono::seconds(60));
}

TEST_CASE("dropping the last Client inside one of its message handlers returns at once",
          "[application][ownership]") {
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto client = std::make_shared<std::optional<Client>>(
      connect("mem://" + unique_name("drop-in-handler") + "?close_timeout=30s", options));
  std::promise<void> dropped;
  auto sub = (*client)->subscribe("t", {}, [client, &dropped](Message&) {
    client->reset();
    dropped.set_value();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  (*client)->publish("t", "x", {});
  CHECK(dropped.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::closed && e.endpoint.empty();
  }));
}

TEST_CASE("dropping the last Client off the io thread waits for the drain within close_timeout",
          "[application][ownership]") {
  // Declared before the client: the handler outlives it, and uses them until it returns.
  Gate gate;
  Latch entered, left;
  auto client = std::make_unique<Client>(
      connect("mem://" + unique_name("drop-bounded") + "?close_timeout=1s"));
  auto sub = client->subscribe("t", {}, [&](Message&) {
    entered.count_down();
    gate.wait();
    left.count_down();
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  client->publish("t", "x", {});
  REQUIRE(entered.wait_for(1));
  auto dropping = std::async(std::launch::async, [&] { client.reset(); });
  // Bounded by close_timeout (1 s) and a margin well under a second, not by further seconds.
  CHECK(dropping.wait_for(std::chrono::seconds(3)) == std::future_status::ready);
  gate.open();
  dropping.wait();
  REQUIRE(left.wait_for(1));  // the handler is done with the gate before it goes
}

namespace {
// A client whose one subscription has a handler running, held there until the gate opens.
struct HeldHandler {
  Gate gate;
  Latch entered, left;
  Client client;
  Subscription sub;
  explicit HeldHandler(const std::string& name) : client(connect("mem://" + unique_name(name))) {
    sub = client.subscribe("t", {}, [this](Message&) {
      entered.count_down();
      gate.wait();
      left.count_down();
    });
    REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
    client.publish("t", "x", {});
    REQUIRE(entered.wait_for(1));
  }
};
}  // namespace

TEST_CASE("a close is done by its deadline while a handler of a subscription it no longer has runs",
          "[application][ownership]") {
  HeldHandler held("close-unsubscribed");
  // Unsubscribed while its handler runs: the client no longer counts it in the close's drain.
  REQUIRE(held.sub.unsubscribe_sync(kWaitBound) == std::error_code{});
  auto closing = std::async(std::launch::async,
                            [&] { return held.client.close_sync(std::chrono::milliseconds(300)); });
  const bool bounded = closing.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  CHECK(bounded);
  held.gate.open();
  const Status closed = closing.get();
  CHECK(closed == errc::timeout);
  CHECK_THAT(closed.cause(), Catch::Contains("handler still running"));
  REQUIRE(held.left.wait_for(1));
}

TEST_CASE("a close asked for while a longer one drains is done by its own deadline",
          "[application][ownership]") {
  HeldHandler held("close-twice");
  std::promise<Status> first;
  held.client.close(std::chrono::seconds(60), [&](const Status& s) { first.set_value(s); });
  auto second = std::async(std::launch::async,
                           [&] { return held.client.close_sync(std::chrono::milliseconds(300)); });
  const bool bounded = second.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  CHECK(bounded);
  held.gate.open();
  CHECK(second.get() == errc::timeout);
  // The first close ends with the same close: it is told once, with the same result.
  auto first_result = first.get_future();
  REQUIRE(first_result.wait_for(kWaitBound) == std::future_status::ready);
  CHECK(first_result.get() == errc::timeout);
  REQUIRE(held.left.wait_for(1));
}

TEST_CASE("wait_ready and unsubscribe of a subscription whose client is gone complete at once",
          "[application][ownership]") {
  Subscription sub;
  {
    Client client = connect("mem://" + unique_name("sub-outlives"));
    sub = client.subscribe("t", {}, [](Message&) {});
    REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  }
  std::promise<Status> ready, unsubscribed;
  sub.wait_ready(std::chrono::seconds(60), [&](const Status& s) { ready.set_value(s); });
  sub.unsubscribe([&](const Status& s) { unsubscribed.set_value(s); });
  auto ready_result = ready.get_future();
  auto unsubscribe_result = unsubscribed.get_future();
  REQUIRE(ready_result.wait_for(kWaitBound) == std::future_status::ready);
  CHECK(ready_result.get() == std::error_code{});  // it was confirmed before the client went
  REQUIRE(unsubscribe_result.wait_for(kWaitBound) == std::future_status::ready);
  const Status gone = unsubscribe_result.get();
  CHECK(gone == errc::closed);
  CHECK_THAT(gone.cause(), Catch::Contains("client is gone"));
}

TEST_CASE("unsubscribing a subscription not yet confirmed answers its waits with closed",
          "[application][ownership]") {
  // Nothing listens there: the subscription waits for a connection that never comes.
  Client client = connect("figg://127.0.0.1:1");
  auto sub = client.subscribe("t", {}, [](Message&) {});
  std::promise<Status> waited;
  sub.wait_ready(std::chrono::seconds(60), [&](const Status& s) { waited.set_value(s); });
  sub.unsubscribe();
  const Status status = sub.wait_ready(kWaitBound);
  CHECK(status == errc::closed);
  CHECK_THAT(status.cause(), Catch::Contains("unsubscribed"));
  auto async_result = waited.get_future();
  REQUIRE(async_result.wait_for(kWaitBound) == std::future_status::ready);
  CHECK(async_result.get() == errc::closed);
}

TEST_CASE("an io_context destroyed before a Client of it ends the process with the rule named",
          "[application][ownership]") {
  for (const char* program : {"io-context-destroyed-first", "io-context-destroyed-after-close"}) {
    INFO(program);
    const ChildResult child = run_child(program);
    INFO(child.output);
    const bool aborted =
        (WIFSIGNALED(child.wait_status) && WTERMSIG(child.wait_status) == SIGABRT) ||
        (WIFEXITED(child.wait_status) && WEXITSTATUS(child.wait_status) == 134);
    CHECK(aborted);
    CHECK_THAT(child.output,
               Catch::Contains("ConnectOptions::io_context") && Catch::Contains("destroyed while"));
  }
}

// ---- 3. Ownership without cycles ----

TEST_CASE("a relay that publishes through its message's client does not keep the client alive",
          "[application][ownership]") {
  const std::string url = "mem://" + unique_name("relay");
  connect(url);  // the mem:// broker's own timer thread stays with the broker: counted before
  const int threads_before = thread_count();
  StateRecorder states;
  {
    ConnectOptions options;
    options.on_state = states.callback();
    Client client = connect(url, options);
    Collector out;
    auto relay = client.subscribe(
        "in", {}, [](Message& m) { m.client().publish("out", std::string(m.payload()), {}); });
    // The other natural spelling: a reference captured by value.
    auto counter = client.subscribe(
        "in", {}, [ref = ClientRef(client)](Message&) mutable { ref.publish("counted", "1", {}); });
    auto sink = client.subscribe("out", {}, [&](Message& m) { out.add(std::string(m.payload())); });
    REQUIRE(relay.wait_ready(kWaitBound) == std::error_code{});
    REQUIRE(counter.wait_ready(kWaitBound) == std::error_code{});
    REQUIRE(sink.wait_ready(kWaitBound) == std::error_code{});
    REQUIRE(client.publish_sync("in", "hello") == std::error_code{});
    REQUIRE(out.wait_for_count(1));
    // Both handlers have returned (their times are recorded as they return), so no call of
    // theirs holds the client as the handle goes: its threads are joined here.
    REQUIRE(eventually([&] {
      int returned = 0;
      for (const auto& s : client.metrics().subscriptions)
        returned += s.topic == "in" && s.handler_time.count >= 1;
      return returned == 2;
    }));
  }  // the application's only handle goes
  CHECK(states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::closed && e.endpoint.empty();
  }));
  // The io thread and the handler threads end with it.
  CHECK(eventually([&] { return thread_count() <= threads_before; }));
}

TEST_CASE("a handler that holds its own Subscription keeps nothing alive once unsubscribed",
          "[application][ownership]") {
  const std::string url = "mem://" + unique_name("own-sub");
  connect(url);  // the mem:// broker's own timer thread stays with the broker: counted before
  const int threads_before = thread_count();
  {
    Client client = connect(url + "?handler_concurrency=4");
    auto own = std::make_shared<Subscription>();
    Latch handled;
    // The handler holds its own handle (to unsubscribe itself, say): a cycle through the
    // subscription's handler until the unsubscribe lets go of it.
    *own = client.subscribe("t", {}, [own, &handled](Message&) { handled.count_down(); });
    REQUIRE(own->wait_ready(kWaitBound) == std::error_code{});
    REQUIRE(client.publish_sync("t", "x") == std::error_code{});
    REQUIRE(handled.wait_for(1));
    CHECK(own->unsubscribe_sync(kWaitBound) == std::error_code{});
  }
  CHECK(eventually([&] { return thread_count() <= threads_before; }));
}

TEST_CASE("a batch handler that holds its own Subscription keeps nothing alive once unsubscribed",
          "[application][ownership]") {
  const std::string url = "mem://" + unique_name("own-batch-sub");
  connect(url);  // the mem:// broker's own timer thread stays with the broker: counted before
  const int threads_before = thread_count();
  {
    Client client = connect(url);
    auto own = std::make_shared<Subscription>();
    Latch handled;
    *own = client.subscribe_batch("t", {}, BatchOptions{2, std::chrono::milliseconds(10)},
                                  [own, &handled](Batch& batch) {
                                    for (std::size_t i = 0; i < batch.size(); ++i)
                                      handled.count_down();
                                  });
    REQUIRE(own->wait_ready(kWaitBound) == std::error_code{});
    REQUIRE(client.publish_sync("t", "x") == std::error_code{});
    REQUIRE(client.publish_sync("t", "y") == std::error_code{});
    REQUIRE(handled.wait_for(2));
    CHECK(own->unsubscribe_sync(kWaitBound) == std::error_code{});
  }
  CHECK(eventually([&] { return thread_count() <= threads_before; }));
}

TEST_CASE("a handler that holds its own Subscription and outlasts the close keeps nothing alive",
          "[application][ownership]") {
  const std::string url = "mem://" + unique_name("own-sub-close");
  connect(url);  // the mem:// broker's own timer thread stays with the broker: counted before
  const int threads_before = thread_count();
  Gate gate;
  Latch entered, left;
  {
    Client client = connect(url);
    auto own = std::make_shared<Subscription>();
    *own = client.subscribe("t", {}, [own, &gate, &entered, &left](Message&) {
      entered.count_down();
      gate.wait();
      left.count_down();
    });
    REQUIRE(own->wait_ready(kWaitBound) == std::error_code{});
    client.publish("t", "x", {});
    REQUIRE(entered.wait_for(1));
    // Its deadline passes with the handler still running: the close is done without it.
    CHECK(client.close_sync(std::chrono::milliseconds(300)) == errc::timeout);
    own.reset();  // only the handler's own copy is left
  }
  gate.open();
  REQUIRE(left.wait_for(1));
  // The handler returned: it lets go of the subscription, and the handler threads end.
  CHECK(eventually([&] { return thread_count() <= threads_before; }));
}

TEST_CASE("a pull subscription the adapter refuses gives each receive the refusal",
          "[application][api]") {
  Client client = connect("mem://" + unique_name("pull-refused"));
  SubscribeOptions options;
  options.group = "~mine";  // a name the mem:// broker keeps for its own
  auto pull = client.pull_subscribe("t", options);
  const auto [status, message] = pull.receive_sync(kWaitBound);
  CHECK(status == errc::invalid_argument);
  CHECK_THAT(status.cause(), Catch::Contains("may not begin with '~'"));
}

TEST_CASE("a ClientRef that outlives its Client fails with closed", "[application][ownership]") {
  ClientRef ref;
  CHECK(ref.expired());
  {
    Client client = connect("mem://" + unique_name("ref"));
    ref = client;
    CHECK_FALSE(ref.expired());
    CHECK(ref.publish_sync("t", "x") == std::error_code{});
  }
  CHECK(ref.expired());
  CHECK(ref.publish_sync("t", "x") == errc::closed);
  CHECK(ref.request_sync("t", "x").ec == errc::closed);
  CHECK(ref.flush_sync(std::chrono::seconds(1)) == errc::closed);
  CHECK(ref.close_sync(std::chrono::seconds(1)) == std::error_code{});  // closed already
  std::promise<Status> published;
  ref.publish("t", "x", [&](const Status& s) { published.set_value(s); });
  CHECK(published.get_future().get() == errc::closed);
  CHECK_THROWS_AS(ref.subscribe("t", {}, [](Message&) {}), Error);
}

TEST_CASE("a dead-letter client named by a ClientRef is not kept alive by the subscription",
          "[application][ownership]") {
  const std::string name = unique_name("dlq-ref");
  Client client = connect("mem://" + name + "?max_attempts=1");
  Collector dead;
  auto dead_sub =
      client.subscribe("dead", {}, [&](Message& m) { dead.add(std::string(m.payload())); });
  REQUIRE(dead_sub.wait_ready(kWaitBound) == std::error_code{});
  StateRecorder other_states;
  ConnectOptions other_options;
  other_options.on_state = other_states.callback();
  auto other = std::make_unique<Client>(connect("mem://" + name, other_options));
  SubscribeOptions options;
  options.dead_letter.topic = "dead";
  options.dead_letter.client = *other;
  auto sub = client.subscribe("t", options, [](Message&) { throw std::runtime_error("no"); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("t", "first") == std::error_code{});
  REQUIRE(dead.wait_for_count(1));
  other.reset();  // the subscription names it, and does not keep it
  CHECK(other_states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::closed && e.endpoint.empty();
  }));
  CHECK(sub.active());
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

// ---- 4. Callbacks serialised as documented ----

TEST_CASE(
    "on_error, on_state and log run one at a time on the io thread, whatever thread the "
    "event came from",
    "[application][callbacks]") {
  std::atomic<int> inside{0}, overlapped{0}, errors{0};
  std::mutex threads_mutex;
  std::set<std::thread::id> threads;
  auto enter = [&] {
    if (inside.fetch_add(1) != 0) ++overlapped;
    {
      std::lock_guard<std::mutex> lock(threads_mutex);
      threads.insert(std::this_thread::get_id());
    }
    // Long enough that two calls at once would meet.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    inside.fetch_sub(1);
  };
  ConnectOptions options;
  options.on_error = [&](std::error_code, const std::string&) {
    enter();
    ++errors;
  };
  options.on_state = [&](const StateEvent&) { enter(); };
  options.log = [&](LogLevel, std::string_view) { enter(); };
  options.log_level = LogLevel::debug;
  Client client = connect("mem://" + unique_name("serialised") + "?handler_concurrency=8", options);
  constexpr int kMessages = 2000;
  Latch handled;
  auto sub = client.subscribe("t", {}, [&](Message&) {
    handled.count_down();
    throw std::runtime_error("refused");
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  std::promise<std::thread::id> io_thread;
  client.publish("t", "first",
                 [&](const Status&) { io_thread.set_value(std::this_thread::get_id()); });
  for (int i = 1; i < kMessages; ++i) client.publish("t", "x", {});
  REQUIRE(handled.wait_for(kMessages));
  REQUIRE(eventually([&] { return errors.load() >= kMessages; }));
  const auto io = io_thread.get_future().get();
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
  CHECK(overlapped.load() == 0);
  std::lock_guard<std::mutex> lock(threads_mutex);
  CHECK(threads == std::set<std::thread::id>{io});
}

// ---- 5. No exception from user code ends the process ----

namespace {
// A broker that confirms every publish at once and subscribes as the one deriving says.
class SubscribingAdapter : public Adapter {
 public:
  static Capabilities caps() {
    Capabilities caps;
    caps.publish = caps.subscribe = caps.publish_confirmed = true;
    return caps;
  }
  Capabilities capabilities() const override { return caps(); }
  void publish(PublishWork work) override { work.done({}); }
  void close(Clock::time_point, std::function<void()> done) override { done(); }
};

// A broker whose subscribe throws what the topic names, as a buggy adapter or a user hook
// inside one could.
class ThrowingSubscribeAdapter : public SubscribingAdapter {
 public:
  explicit ThrowingSubscribeAdapter(const AdapterContext&) {}
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink>) override {
    if (spec.topic == "std") throw std::runtime_error("a standard exception");
    throw 42;
  }
  void ping(OpCompletion) override { throw 42; }
};
}  // namespace

TEST_CASE("an adapter that throws anything from subscribe fails that subscription only",
          "[application][exceptions]") {
  register_test_scheme<ThrowingSubscribeAdapter>("throwing-subscribe");
  Client client = connect("throwing-subscribe://x");
  auto standard = client.subscribe("std", {}, [](Message&) {});
  auto other = client.subscribe("int", {}, [](Message&) {});
  const Status refused = standard.wait_ready(kWaitBound);
  CHECK(refused);
  CHECK_THAT(refused.cause(), Catch::Contains("a standard exception"));
  CHECK(other.wait_ready(kWaitBound));
  std::promise<Status> pinged;
  client.ping(std::chrono::hours(1), [&](const Status& s) { pinged.set_value(s); });
  auto ping = pinged.get_future();
  REQUIRE(ping.wait_for(kWaitBound) == std::future_status::ready);  // now, not in an hour
  CHECK_THAT(ping.get().cause(), Catch::Contains("the adapter threw"));
  CHECK(client.publish_sync("t", "x") == std::error_code{});  // the client goes on
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

namespace {
// A broker that ends each subscription as its topic says, the ways adapters report a refusal
// (an end before any confirmation; a refusal, then the end) and an end after a confirmation.
class EndingAdapter : public SubscribingAdapter {
 public:
  explicit EndingAdapter(const AdapterContext& ctx) : strand_(ctx.strand()) {}
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    asio::post(strand_, [topic = spec.topic, sink] {
      const auto refused = make_error_code(errc::broker_error);
      if (topic == "confirmed-then-ended") sink->ready({});
      if (topic == "refused-then-ended") sink->ready(refused, "the broker refused it");
      sink->ended(refused, "the broker ended it");
    });
    return std::make_shared<Idle>();
  }

 private:
  struct Idle : AdapterSubscription {
    void unsubscribe(OpCompletion done) override { done({}); }
    void pause() override {}
    void resume() override {}
    void set_max_in_flight(std::uint32_t) override {}
  };
  Strand strand_;
};
}  // namespace

TEST_CASE("a subscription's refusal or end reaches on_error once", "[application][errors]") {
  register_test_scheme<EndingAdapter>("ending-test");
  std::mutex mutex;
  std::vector<std::string> errors;
  ConnectOptions options;
  options.on_error = [&](std::error_code, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.push_back(what);
  };
  Client client = connect("ending-test://x", options);
  for (const char* topic : {"ended-unconfirmed", "refused-then-ended", "confirmed-then-ended"})
    client.subscribe(topic, {}, [](Message&) {}).wait_ready(kWaitBound);
  REQUIRE(client.close_sync(kWaitBound) == std::error_code{});  // every report made before it
  std::lock_guard<std::mutex> lock(mutex);
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  INFO(all);
  CHECK(errors.size() == 3);
  const auto said = [&](const std::string& text) {
    return std::count_if(errors.begin(), errors.end(),
                         [&](const std::string& e) { return e.find(text) != std::string::npos; });
  };
  CHECK(said("ended-unconfirmed: subscription refused") == 1);
  CHECK(said("refused-then-ended: subscription refused") == 1);
  CHECK(said("confirmed-then-ended: subscription ended") == 1);
}

namespace {
// A broker whose own work on the io thread throws out of the strand (a bug of the adapter's):
// each publish leaves such a handler behind, then completes.
class EscapingAdapter : public Adapter {
 public:
  explicit EscapingAdapter(const AdapterContext& ctx) : strand_(ctx.strand()) {}
  static Capabilities caps() {
    Capabilities caps;
    caps.publish = true;
    return caps;
  }
  Capabilities capabilities() const override { return caps(); }
  void publish(PublishWork work) override {
    asio::post(strand_, [] { throw std::runtime_error("escaped the strand"); });
    work.done({});
  }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink>) override {
    return nullptr;
  }
  void close(Clock::time_point, std::function<void()> done) override { done(); }

 private:
  Strand strand_;
};
}  // namespace

TEST_CASE(
    "an exception out of a handler of the client's io thread is reported, and the thread "
    "goes on",
    "[application][exceptions]") {
  register_test_scheme<EscapingAdapter>("escaping-test");
  Latch reported;
  ConnectOptions options;
  options.on_error = [&](std::error_code, const std::string& what) {
    if (what.find("escaped the strand") != std::string::npos) reported.count_down();
  };
  Client client = connect("escaping-test://x", options);
  for (int i = 0; i < 3; ++i) CHECK(client.publish_sync("t", "x") == std::error_code{});
  CHECK(reported.wait_for(3));
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE("whatever any user callback throws, the client reports it once and goes on",
          "[application][exceptions]") {
  std::mutex mutex;
  std::vector<std::string> reported;
  std::atomic<int> logged_throws{0};
  ConnectOptions options;
  options.on_state = [](const StateEvent&) { throw 7; };
  options.on_error = [&](std::error_code, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      reported.push_back(what);
    }
    throw std::runtime_error("on_error throws too");
  };
  options.log = [&](LogLevel, std::string_view) {
    ++logged_throws;
    throw "log throws";
  };
  options.log_level = LogLevel::debug;
  options.trace.inject = [](std::string_view, Headers&) { throw std::logic_error("inject"); };
  options.trace.extract = [](const Message&) -> std::shared_ptr<void> { throw 3.5; };
  Client client = connect(
      "mem://" + unique_name("throws") + "?envelope=cloudevents&max_attempts=2&requeue_delay=1ms",
      options);
  Latch discarded, handled, middleware;
  SubscribeOptions sub_options;
  sub_options.on_discard = [&](const Message&) {
    discarded.count_down();
    throw 1;
  };
  sub_options.middleware.push_back([&](Message& m, const MessageHandler& next) {
    middleware.count_down();
    if (m.payload() == "middleware") throw 'm';
    next(m);
  });
  auto sub = client.subscribe("t", sub_options, [&](Message& m) {
    handled.count_down();
    if (m.payload() == "handler") throw 2;
  });
  auto server = client.serve("svc", [](Message&) -> std::string { throw 5; });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(server.wait_ready(kWaitBound) == std::error_code{});
  Latch completed;
  client.publish("t", "handler", [&](const Status&) {
    completed.count_down();
    throw 9;
  });
  client.publish("t", "middleware", {});
  REQUIRE(completed.wait_for(1));
  REQUIRE(discarded.wait_for(2));  // each failed twice (max_attempts=2), then was discarded
  const Reply reply = client.request_sync("svc", "x");
  CHECK(reply.ec == errc::handler_failed);
  // The client goes on after all of it: its io thread and handler threads are alive.
  Collector fine;
  auto after =
      client.subscribe("after", {}, [&](Message& m) { fine.add(std::string(m.payload())); });
  REQUIRE(after.wait_ready(kWaitBound) == std::error_code{});
  CHECK(client.publish_sync("after", "ok") == std::error_code{});
  CHECK(fine.wait_for_count(1));
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
  std::lock_guard<std::mutex> lock(mutex);
  auto said = [&](const std::string& text) {
    return std::count_if(reported.begin(), reported.end(),
                         [&](const std::string& r) { return r.find(text) != std::string::npos; });
  };
  CHECK(said("on_state threw") >= 1);
  CHECK(said("inject threw") >= 1);
  CHECK(said("extract threw") >= 1);
  CHECK(said("on_discard threw") == 2);
  CHECK(said("completion threw") == 1);
  CHECK(said("handler threw") >= 4);
  CHECK(logged_throws.load() > 0);
}

// ---- The literals a user writes ----

TEST_CASE("options and requests take the literals a user writes", "[application][api]") {
  Options options;
  options.set("max_in_flight", 100)
      .set("max_attempts", 3u)
      .set("tls", false)
      .set("op_timeout", "5s")
      .set("close_timeout", std::chrono::seconds(5))
      .set("connect_timeout", std::string("2s"))
      .set("requeue_delay", std::string_view("10ms"));
  CHECK(options.values().at("max_in_flight") == "100");
  CHECK(options.values().at("max_attempts") == "3");
  CHECK(options.values().at("tls") == "false");
  CHECK(options.values().at("close_timeout") == "5000ms");
  ConnectOptions connect_options;
  connect_options.options = options;
  Client client = connect("mem://" + unique_name("literals"), connect_options);
  auto server = client.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(server.wait_ready(kWaitBound) == std::error_code{});
  CHECK(client.request_sync("echo", "a").payload == "a");
  CHECK(client.request_sync("echo", "b", {}).payload == "b");
  CHECK(client.request_sync("echo", "c", std::chrono::seconds(5)).payload == "c");
  CHECK(client.request_sync("echo", "d", std::chrono::milliseconds(5000)).payload == "d");
  std::promise<Reply> replied;
  client.request("echo", "e", {}, [&](Reply r) { replied.set_value(std::move(r)); });
  CHECK(replied.get_future().get().payload == "e");
  CHECK(client.close_sync(kWaitBound) == std::error_code{});
}

TEST_CASE("with no log sink a discarded message is said on stderr, and with one only to the sink",
          "[application][log]") {
  const ChildResult quiet_by_default = run_child("failing-handler-no-log");
  INFO(quiet_by_default.output);
  REQUIRE(WIFEXITED(quiet_by_default.wait_status));
  CHECK(WEXITSTATUS(quiet_by_default.wait_status) == 0);
  CHECK_THAT(quiet_by_default.output, Catch::Contains("polybus[") &&
                                          Catch::Contains("warn: work: message") &&
                                          Catch::Contains("discarded"));
  const ChildResult with_sink = run_child("failing-handler-with-log");
  INFO(with_sink.output);
  REQUIRE(WIFEXITED(with_sink.wait_status));
  CHECK(WEXITSTATUS(with_sink.wait_status) == 0);
  CHECK_THAT(with_sink.output, !Catch::Contains("polybus["));
}
