// SPDX-License-Identifier: Apache-2.0
// The polybus adapter (quickio, quickio+ws, quickio+http) against the in-process server.
#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>

#include "polybus/client.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio.hpp"
#include "polybus/quickio_testing.hpp"
#include "test_support.hpp"

namespace {

using namespace polybus;
using namespace polybus::test;
using quickio::testing::Server;

const std::string kFast = "?reconnect_initial=20ms&reconnect_max=200ms&http_poll_delay_max=20ms";

std::string url_for(const std::string& scheme, const Server& server,
                    const std::string& extra = "") {
  quickio::register_scheme();
  return scheme + "://" + server.address() + kFast + extra;
}

}  // namespace

TEST_CASE("adapter: publish reaches subscribers of the topic, text payloads unescaped") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  auto subscriber = connect(url_for(scheme, *server));
  auto publisher = connect(url_for(scheme, *server));
  Collector got;
  auto sub =
      subscriber.subscribe("orders", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(publisher.publish_sync("orders", "plain") == std::error_code{});
  REQUIRE(publisher.publish_sync("orders", "with \"quotes\"\nand a newline") == std::error_code{});
  REQUIRE(got.wait_for_count(2));
  CHECK(got.order() == std::vector<std::string>{"plain", "with \"quotes\"\nand a newline"});
  CHECK(subscriber.capabilities().publish_confirmed == false);
}

TEST_CASE("adapter: a publisher keeping a window of completions is paced by the connection") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  // 1 MB published through 16 KiB of allowed unsent bytes: completions come as bytes are
  // written, so a window of 50 never overruns the bound (completed at once instead, the burst
  // would fail with queue_full).
  const std::string options = "&max_queued_bytes=16384";
  auto subscriber = connect(url_for(scheme, *server, options));
  auto publisher = connect(url_for(scheme, *server, options));
  Collector got;
  auto sub =
      subscriber.subscribe("paced", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  constexpr int kCount = 5000, kWindow = 50;
  std::mutex mutex;
  std::condition_variable cv;
  int in_flight = 0, failures = 0;
  for (int i = 0; i < kCount; ++i) {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(cv.wait_for(lock, kWaitBound, [&] { return in_flight < kWindow; }));
    ++in_flight;
    lock.unlock();
    publisher.publish("paced", std::to_string(i) + std::string(200, '.'), [&](std::error_code ec) {
      std::lock_guard<std::mutex> guard(mutex);
      if (ec) ++failures;
      --in_flight;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(cv.wait_for(lock, kWaitBound, [&] { return in_flight == 0; }));
    CHECK(failures == 0);
  }
  REQUIRE(got.wait_for_count(kCount));
  CHECK(got.order().front() == "0" + std::string(200, '.'));
  CHECK(got.order().back() == std::to_string(kCount - 1) + std::string(200, '.'));
}

TEST_CASE("adapter: JSON data with line breaks keeps HTTP's event framing") {
  auto server = Server::launch();
  auto subscriber = connect(url_for("quickio+http", *server, "&payload=json"));
  auto publisher = connect(url_for("quickio+http", *server, "&payload=json"));
  Collector got;
  auto sub =
      subscriber.subscribe("lines", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(publisher.publish_sync("lines", "{\n  \"a\": 1,\r\n  \"b\": \"x\"\n}") ==
          std::error_code{});
  REQUIRE(publisher.publish_sync("lines", "2") == std::error_code{});
  REQUIRE(got.wait_for_count(2));
  CHECK(got.order() == std::vector<std::string>{"{   \"a\": 1,    \"b\": \"x\" }", "2"});
}

TEST_CASE("adapter: payload=json sends JSON verbatim and refuses what is not JSON") {
  auto server = Server::launch();
  auto client = connect(url_for("quickio", *server, "&payload=json"));
  Collector got;
  auto sub = client.subscribe("json", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("json", R"({"a":[1,2]})") == std::error_code{});
  CHECK(client.publish_sync("json", "{broken") == make_error_code(errc::invalid_argument));
  REQUIRE(got.wait_for_count(1));
  CHECK(got.order().front() == R"({"a":[1,2]})");
}

TEST_CASE(
    "adapter: payload=json delivers the same JSON value: line breaks as spaces, no outer "
    "white space") {
  for (const std::string scheme : {"quickio", "quickio+ws", "quickio+http"}) {
    DYNAMIC_SECTION(scheme) {
      auto server = Server::launch();
      auto client = connect(url_for(scheme, *server, "&payload=json"));
      Collector got;
      auto sub =
          client.subscribe("spaced", {}, [&](Message& m) { got.add(std::string(m.payload())); });
      REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
      for (const std::string payload : {"{} ", " \"s\"", "\t[1, 2]\r\n", "{\n  \"a\": 1\n}"})
        REQUIRE(client.publish_sync("spaced", payload) == std::error_code{});
      REQUIRE(got.wait_for_count(4));
      CHECK(got.order() == std::vector<std::string>{"{}", "\"s\"", "[1, 2]", "{   \"a\": 1 }"});
    }
  }
}

TEST_CASE("adapter: text payloads must be UTF-8 and topics must be clean paths") {
  auto server = Server::launch();
  auto client = connect(url_for("quickio", *server));
  CHECK(client.publish_sync("bin", std::string("\xff\xfe", 2)) ==
        make_error_code(errc::invalid_argument));
  CHECK(client.publish_sync("has space", "x") == make_error_code(errc::invalid_argument));
  CHECK(client.publish_sync("trailing/", "x") == make_error_code(errc::invalid_argument));
  CHECK(client.publish_sync("nested/path_ok-1", "x") == std::error_code{});
  const Status refused = client.publish_sync("//double", "x");
  CHECK(refused == errc::invalid_argument);
  CHECK_THAT(refused.cause(), Catch::Contains("'//double'"));
}

TEST_CASE("adapter: a topic is the same event path with or without its leading '/'") {
  auto server = Server::launch();
  auto client = connect(url_for("quickio", *server));
  Collector slashed, plain;
  auto a = client.subscribe("/pub/room", {}, [&](Message& m) {
    slashed.add(std::string(m.topic()) + "=" + std::string(m.payload()));
  });
  auto b = client.subscribe("pub/room", {}, [&](Message& m) {
    plain.add(std::string(m.topic()) + "=" + std::string(m.payload()));
  });
  REQUIRE(a.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(b.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("/pub/room", "one") == std::error_code{});
  REQUIRE(client.publish_sync("pub/room", "two") == std::error_code{});
  // Each subscription sees both, under the topic it was given.
  REQUIRE(slashed.wait_for_count(2));
  REQUIRE(plain.wait_for_count(2));
  CHECK(slashed.count("/pub/room=one") == 1);
  CHECK(slashed.count("/pub/room=two") == 1);
  CHECK(plain.count("pub/room=one") == 1);
  CHECK(plain.count("pub/room=two") == 1);
}

TEST_CASE("adapter: request/reply through serve, handler failures and nobody serving") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  auto responder = connect(url_for(scheme, *server));
  auto requester = connect(url_for(scheme, *server));
  auto serving = responder.serve("upper", [](Message& m) {
    std::string text(m.payload());
    if (text == "boom") throw std::runtime_error("kaboom");
    for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
  });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  auto reply = requester.request_sync("upper", "shout", std::chrono::seconds(10));
  REQUIRE(reply.ec == std::error_code{});
  CHECK(reply.payload == "SHOUT");
  auto failed = requester.request_sync("upper", "boom", std::chrono::seconds(10));
  CHECK(failed.ec == make_error_code(errc::handler_failed));
  CHECK_THAT(failed.detail, Catch::Contains("kaboom"));
  auto nobody = requester.request_sync("nobody", "x", std::chrono::seconds(10));
  CHECK(nobody.ec == make_error_code(errc::no_responder));
  Latch pinged;
  std::error_code ping_result = make_error_code(errc::timeout);
  requester.ping([&](std::error_code ec) {
    ping_result = ec;
    pinged.count_down();
  });
  REQUIRE(pinged.wait_for(1));
  CHECK(ping_result == std::error_code{});
}

// The spec's pause between polls is up to 2 s; tests use 20 ms. A longer one must only slow
// delivery down, and what was published before close must still leave.
TEST_CASE("adapter: quickio+http with a poll delay of hundreds of ms delivers and replies") {
  auto server = Server::launch();
  quickio::register_scheme();
  const std::string url = "quickio+http://" + server->address() + "?http_poll_delay_max=400ms";
  auto subscriber = connect(url);
  auto responder = connect(url);
  Collector got;
  auto sub =
      subscriber.subscribe("slow", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  auto serving = responder.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  {
    // Publishes, then closes at once, as `polybus pub` does.
    auto publisher = connect(url);
    for (int i = 0; i < 3; ++i)
      REQUIRE(publisher.publish_sync("slow", std::to_string(i)) == std::error_code{});
    REQUIRE(publisher.close_sync(kWaitBound) == std::error_code{});
  }
  REQUIRE(got.wait_for_count(3));
  CHECK(got.order() == std::vector<std::string>{"0", "1", "2"});
  auto requester = connect(url);
  auto reply = requester.request_sync("echo", "back", kWaitBound);
  REQUIRE(reply.ec == std::error_code{});
  CHECK(reply.payload == "back");
}

TEST_CASE("adapter: a request pending when the server stops fails as disconnected") {
  auto server = Server::launch();
  // One client serves and requests: the request stays pending at the server until the
  // connection goes (a separate responder that went away would be answered 500 first).
  auto client = connect(url_for("quickio", *server));
  Latch received;
  Latch release;
  auto serving = client.serve("slow", [&](Message&) {
    received.count_down();
    release.wait_for(1);
    return std::string("late");
  });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  Latch done;
  Reply result;
  client.request("slow", "x", std::chrono::seconds(20), [&](Reply r) {
    result = std::move(r);
    done.count_down();
  });
  REQUIRE(received.wait_for(1));
  server->stop();
  REQUIRE(done.wait_for(1));
  CHECK(result.ec == make_error_code(errc::disconnected));
  release.count_down();
}

TEST_CASE("adapter: publishes made while the server is down are delivered after it restarts") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  Latch disconnected;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) disconnected.count_down();
  };
  auto client = connect(url_for(scheme, *server), options);
  Collector got;
  auto sub =
      client.subscribe("restart", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("restart", "before") == std::error_code{});
  REQUIRE(got.wait_for_count(1));
  server->stop();
  REQUIRE(disconnected.wait_for(1));
  Latch published;
  std::atomic<int> failures{0};
  for (int i = 0; i < 3; ++i)
    client.publish("restart", "during " + std::to_string(i), [&](std::error_code ec) {
      if (ec) ++failures;
      published.count_down();
    });
  server->start();
  REQUIRE(published.wait_for(3));
  CHECK(failures.load() == 0);
  REQUIRE(got.wait_for_count(4));
  CHECK(got.order() == std::vector<std::string>{"before", "during 0", "during 1", "during 2"});
}

TEST_CASE("adapter: a queued publish whose deadline passes is never sent later") {
  auto server = Server::launch();
  Latch disconnected;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) disconnected.count_down();
  };
  auto client = connect(url_for("quickio", *server), options);
  Collector got;
  auto sub = client.subscribe("expiry", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  server->stop();
  REQUIRE(disconnected.wait_for(1));
  PublishOptions short_deadline;
  short_deadline.timeout = std::chrono::milliseconds(50);
  // The server is gone: the deadline's failure says the client is not connected, and why.
  const Status expired = client.publish_sync("expiry", "expired", short_deadline);
  CHECK((expired == errc::disconnected || expired == errc::connect_failed));
  CHECK(expired.cause().find(server->address()) != std::string::npos);
  client.publish("expiry", "kept", [](std::error_code) {});
  server->start();
  REQUIRE(got.wait_for_count(1));
  REQUIRE(client.publish_sync("expiry", "after") == std::error_code{});
  REQUIRE(got.wait_for_count(2));
  CHECK(got.order() == std::vector<std::string>{"kept", "after"});
}

TEST_CASE("adapter: close completes a pending request") {
  auto server = Server::launch();
  auto responder = connect(url_for("quickio", *server));
  Latch received, release;
  auto serving = responder.serve("held", [&](Message&) {
    received.count_down();
    release.wait_for(1);
    return std::string();
  });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  auto requester = connect(url_for("quickio", *server));
  Latch done;
  Reply result;
  requester.request("held", "x", std::chrono::seconds(20), [&](Reply r) {
    result = std::move(r);
    done.count_down();
  });
  REQUIRE(received.wait_for(1));
  // Close waits for the request up to its deadline, then cuts it off and says so.
  const Status closed = requester.close_sync(std::chrono::milliseconds(300));
  CHECK(closed == errc::timeout);
  CHECK_THAT(closed.cause(), Catch::Contains("1 operation(s) unfinished"));
  REQUIRE(done.wait_for(1));
  CHECK(result.ec == errc::closed);
  release.count_down();
}

TEST_CASE("adapter: a subscription the server refuses fails wait_ready with broker_error") {
  quickio::testing::ServerOptions options;
  options.max_subscriptions = 1;
  auto server = Server::launch(options);
  auto client = connect(url_for("quickio", *server));
  auto first = client.subscribe("one", {}, [](Message&) {});
  REQUIRE(first.wait_ready(kWaitBound) == std::error_code{});
  auto second = client.subscribe("two", {}, [](Message&) {});
  CHECK(second.wait_ready(kWaitBound) == make_error_code(errc::broker_error));
}

TEST_CASE("adapter: a restart mid-stream keeps delivery in order and resumes it afterwards") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  auto subscriber = connect(url_for(scheme, *server));
  auto publisher = connect(url_for(scheme, *server));
  std::mutex mutex;
  std::vector<int> seen;
  Collector got;
  auto sub = subscriber.subscribe("stream", {}, [&](Message& m) {
    std::string text(m.payload());
    if (text != "last") {
      std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(std::stoi(text));
    }
    got.add(text);
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  constexpr int kCount = 200;
  Latch completed;
  std::thread restarter([&] {
    completed.wait_for(kCount / 2);
    server->stop();
    server->start();
  });
  for (int i = 0; i < kCount; ++i)
    publisher.publish("stream", std::to_string(i),
                      [&](std::error_code) { completed.count_down(); });
  REQUIRE(completed.wait_for(kCount));
  restarter.join();
  // Both clients are back once the server sees the subscription again; then delivery resumes.
  auto until = std::chrono::steady_clock::now() + kWaitBound;
  while (server->subscribers("/stream") != 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(publisher.publish_sync("stream", "last") == std::error_code{});
  REQUIRE(got.wait_until(
      [](const std::map<std::string, int>& counts) { return counts.count("last") > 0; }));
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // no duplicates
}

// ---------------------------------------------------------------------------------------------
// The test server's journal and fault rules, seen through real clients.

namespace {

using polybus::testing::JournalEntry;
using polybus::testing::parse_fault_rule;

quickio::testing::ServerOptions with_faults(std::initializer_list<const char*> rules) {
  quickio::testing::ServerOptions options;
  for (const char* rule : rules) options.faults.push_back(parse_fault_rule(rule));
  return options;
}

std::string upper(Message& m) {
  std::string text(m.payload());
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

TEST_CASE("adapter: the test server's journal shows each client's events and callbacks in order",
          "[journal]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  quickio::testing::ServerOptions options;
  options.journal_capacity = 10000;
  auto server = Server::launch(options);
  auto subscriber = connect(url_for(scheme, *server));
  auto responder = connect(url_for(scheme, *server));
  auto publisher = connect(url_for(scheme, *server));
  Collector got;
  auto sub =
      subscriber.subscribe("log", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  auto serving = responder.serve("upper", upper);
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i)
    REQUIRE(publisher.publish_sync("log", "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(got.wait_for_count(3));
  const auto reply = publisher.request_sync("upper", "shout", kWaitBound);
  REQUIRE(reply.ec == std::error_code{});
  REQUIRE(reply.payload == "SHOUT");

  auto& journal = server->journal();
  std::string lines;  // what a failure shows
  for (const JournalEntry& e : journal.entries())
    lines += polybus::testing::Journal::json_line(e) + "\n";
  INFO(lines);
  const auto only = [&](const std::function<bool(const JournalEntry&)>& match) {
    const auto found = journal.entries(match);
    REQUIRE(found.size() == 1);
    return found.front();
  };
  // The subscription, answered 200 on its own callback id.
  const JournalEntry on = only(
      [](const JournalEntry& e) { return e.received && e.kind == "/qio/on" && e.topic == "/log"; });
  CHECK_FALSE(on.id.empty());
  // (Over HTTP the handshake's /qio/hostname took callback id 1 before.)
  const JournalEntry on_answer = only([&](const JournalEntry& e) {
    return !e.received && e.kind == "/qio/callback" && e.connection == on.connection &&
           e.id == on.id && e.seq > on.seq;
  });
  CHECK(on_answer.text == "200");

  // Each publish, then its delivery to the subscriber, with the JSON string's bytes.
  const auto publishes =
      journal.entries([](const JournalEntry& e) { return e.received && e.kind == "/log"; });
  const auto deliveries =
      journal.entries([](const JournalEntry& e) { return !e.received && e.kind == "/log"; });
  REQUIRE(publishes.size() == 3);
  REQUIRE(deliveries.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(publishes[i].topic == "/log");
    CHECK(publishes[i].bytes == 4);  // "m0", quoted
    CHECK(publishes[i].id.empty());  // no callback asked
    CHECK(publishes[i].connection == publishes[0].connection);
    CHECK(deliveries[i].connection == on.connection);
    CHECK(deliveries[i].bytes == 4);
    CHECK(deliveries[i].seq > publishes[i].seq);
  }
  CHECK(publishes[0].connection != on.connection);

  // The request, relayed to the responder as a server callback, its answer, and the answer to
  // the requester on the requester's callback id.
  const JournalEntry request =
      only([](const JournalEntry& e) { return e.received && e.kind == "/upper"; });
  const JournalEntry relayed =
      only([](const JournalEntry& e) { return !e.received && e.kind == "/upper"; });
  const JournalEntry answered = only([&](const JournalEntry& e) {
    return e.received && e.kind == "/qio/callback" && e.id == relayed.id;
  });
  const JournalEntry replied = only([&](const JournalEntry& e) {
    return !e.received && e.kind == "/qio/callback" && e.connection == request.connection &&
           e.id == request.id && e.seq > request.seq;
  });
  CHECK(request.connection == publishes[0].connection);
  CHECK_FALSE(request.id.empty());
  CHECK(request.bytes == 7);  // "shout", quoted
  CHECK(relayed.connection != request.connection);
  CHECK(answered.connection == relayed.connection);
  CHECK(answered.text == "200");
  CHECK(answered.bytes == 7);  // "SHOUT", quoted
  CHECK(replied.text == "200");
  CHECK(replied.bytes == 7);
  CHECK(request.seq < relayed.seq);
  CHECK(relayed.seq < answered.seq);
  CHECK(answered.seq < replied.seq);
}

TEST_CASE(
    "adapter: the test server's error rule answers a request with its code and text, and "
    "the next request succeeds",
    "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch(with_faults({"unit=/upper,nth=2,error=503 overloaded"}));
  auto responder = connect(url_for(scheme, *server));
  auto requester = connect(url_for(scheme, *server));
  auto serving = responder.serve("upper", upper);
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  const auto first = requester.request_sync("upper", "a", kWaitBound);
  CHECK(first.ec == std::error_code{});
  CHECK(first.payload == "A");
  const auto refused = requester.request_sync("upper", "b", kWaitBound);
  CHECK(refused.ec == make_error_code(errc::broker_error));
  CHECK_THAT(refused.detail, Catch::Contains("overloaded"));
  const auto after = requester.request_sync("upper", "c", kWaitBound);
  CHECK(after.ec == std::error_code{});
  CHECK(after.payload == "C");
  CHECK(server->faults().fired(1) == 1);
}

TEST_CASE("adapter: the test server's fatal error answers, then closes, and the client reconnects",
          "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch(with_faults({"unit=/upper,once,fatal,error=500 going away"}));
  auto responder = connect(url_for(scheme, *server));
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto requester = connect(url_for(scheme, *server), options);
  auto serving = responder.serve("upper", upper);
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  const auto refused = requester.request_sync("upper", "a", kWaitBound);
  CHECK(refused.ec == make_error_code(errc::broker_error));
  CHECK_THAT(refused.detail, Catch::Contains("going away"));
  const auto lost =
      states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::disconnected; });
  REQUIRE(lost);
  REQUIRE(states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::connected; },
                          *lost));
  const auto after = requester.request_sync("upper", "b", kWaitBound);
  CHECK(after.ec == std::error_code{});
  CHECK(after.payload == "B");
}

TEST_CASE(
    "adapter: the test server's error on a publish, which has no callback to answer, "
    "closes the publisher's connection, which reconnects",
    "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch(with_faults({"unit=/events,once,error=500 refused"}));
  auto subscriber = connect(url_for(scheme, *server));
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto publisher = connect(url_for(scheme, *server), options);
  Collector got;
  auto sub =
      subscriber.subscribe("events", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(publisher.publish_sync("events", "refused") == std::error_code{});
  const auto lost =
      states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::disconnected; });
  REQUIRE(lost);
  REQUIRE(states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::connected; },
                          *lost));
  REQUIRE(publisher.publish_sync("events", "after") == std::error_code{});
  REQUIRE(got.wait_for_count(1));
  CHECK(got.order() == std::vector<std::string>{"after"});
}

TEST_CASE("adapter: the test server's faults on publishes: one swallowed, one delivered twice",
          "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server =
      Server::launch(with_faults({"unit=/events,nth=2,swallow", "unit=/events,nth=3,duplicate"}));
  auto subscriber = connect(url_for(scheme, *server));
  auto publisher = connect(url_for(scheme, *server));
  Collector got;
  auto sub =
      subscriber.subscribe("events", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 4; ++i)
    REQUIRE(publisher.publish_sync("events", "m" + std::to_string(i)) == std::error_code{});
  // Each rule counts every publish: the first swallows m1, the second delivers m2 twice; m3
  // comes last, so once four have come nothing else is on its way.
  REQUIRE(got.wait_for_count(4));
  CHECK(got.order() == std::vector<std::string>{"m0", "m2", "m2", "m3"});
}

TEST_CASE("adapter: the test server's delay holds a client's answers for the delay", "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  constexpr auto kDelay = std::chrono::milliseconds(300);
  auto server = Server::launch(with_faults({"unit=/upper,once,delay=300"}));
  auto responder = connect(url_for(scheme, *server));
  auto requester = connect(url_for(scheme, *server));
  auto serving = responder.serve("upper", upper);
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  const auto start = std::chrono::steady_clock::now();
  const auto held = requester.request_sync("upper", "late", kWaitBound);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(held.ec == std::error_code{});
  CHECK(held.payload == "LATE");
  CHECK(took >= kDelay);  // the timer fires no earlier
  // Only the requester's output was held, and only once.
  const auto again = requester.request_sync("upper", "now", kWaitBound);
  CHECK(again.payload == "NOW");
  CHECK(server->faults().fired(1) == 1);
}

TEST_CASE(
    "adapter: the test server's close and reset of a subscribing client: it reconnects "
    "and subscribes again",
    "[faults]") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  auto action = GENERATE(as<std::string>{}, "close", "reset");
  CAPTURE(scheme, action);
  auto server = Server::launch(with_faults({("unit=/qio/on,topic=/log,once," + action).c_str()}));
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto subscriber = connect(url_for(scheme, *server), options);
  auto publisher = connect(url_for(scheme, *server));
  Collector got;
  auto sub =
      subscriber.subscribe("log", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  CHECK(server->faults().fired(1) == 1);
  const auto lost =
      states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::disconnected; });
  REQUIRE(lost);
  const std::string why = states.at(*lost).detail;
  CAPTURE(why);
  // A raw or WebSocket client reads the RST as a reset; over HTTP the next POST fails.
  if (scheme != "quickio+http")
    CHECK((why.find("reset") != std::string::npos) == (action == "reset"));
  REQUIRE(publisher.publish_sync("log", "after") == std::error_code{});
  REQUIRE(got.wait_for_count(1));
  CHECK(got.order() == std::vector<std::string>{"after"});
}

TEST_CASE("adapter: the test server's probability rule with a seed fails the same requests twice",
          "[faults]") {
  const auto failures = [] {
    auto server =
        Server::launch(with_faults({"unit=/flaky,probability=0.5,seed=7,error=503 unlucky"}));
    auto responder = connect(url_for("quickio", *server));
    auto requester = connect(url_for("quickio", *server));
    auto serving = responder.serve("flaky", upper);
    REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
    std::vector<int> failed;
    for (int i = 0; i < 20; ++i) {
      const auto reply = requester.request_sync("flaky", "x", kWaitBound);
      REQUIRE((reply.ec == std::error_code{} || reply.ec == errc::broker_error));
      if (reply.ec) failed.push_back(i);
    }
    return failed;
  };
  const std::vector<int> first = failures();
  CHECK_FALSE(first.empty());
  CHECK(first.size() < 20);
  CHECK(failures() == first);
}
