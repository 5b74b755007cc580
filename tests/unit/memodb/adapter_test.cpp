// SPDX-License-Identifier: Apache-2.0
// The MemoDB schemes without a broker: registration, capabilities, URL and option checks, what
// is not supported, and deadlines when nobody answers.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>

#include "polybus/memodb.hpp"
#include "polybus/polybus.hpp"

using namespace polybus;
using namespace std::chrono_literals;

namespace {

Client connect_memodb(const std::string& url) {
  memodb::register_scheme();
  return connect(url);
}

std::error_code connect_error(const std::string& url) {
  try {
    connect_memodb(url);
  } catch (const Error& e) {
    return e.code();
  }
  return {};
}

}  // namespace

TEST_CASE("memodb+tcp and memodb+ipc are registered with request/reply only", "[memodb][adapter]") {
  memodb::register_scheme();
  memodb::register_scheme();  // idempotent
  for (const char* scheme : {"memodb+tcp", "memodb+ipc"}) {
    const auto info = describe_scheme(scheme);
    REQUIRE(info.has_value());
    const auto& c = info->capabilities;
    CHECK(c.request_reply);
    CHECK_FALSE(c.publish);
    CHECK_FALSE(c.subscribe);
    // Request/reply, and reconnects paced by the client's policy; nothing else.
    for (const auto& [name, value] : c.list()) {
      const std::string n = name;
      CHECK(value == (n == "request_reply" || n == "reconnect_policy"));
    }
    for (const char* option : {"max_requests", "workers", "job_timeout", "queue_timeout",
                               "heartbeat_interval", "heartbeat_timeout", "op_timeout"})
      CHECK(info->options.find(option) != nullptr);
  }
}

TEST_CASE("memodb URLs name one broker address", "[memodb][adapter]") {
  CHECK(connect_error("memodb+tcp://127.0.0.1") == errc::invalid_url);  // no port
  CHECK(connect_error("memodb+tcp://a:1,b:2") == errc::invalid_url);
  CHECK(connect_error("memodb+tcp://127.0.0.1:1/path") == errc::invalid_url);
  CHECK(connect_error("memodb+ipc://host/path") == errc::invalid_url);
  CHECK(connect_error("memodb+ipc://") == errc::invalid_url);
  CHECK(connect_error("memodb+tcp://127.0.0.1:1?tls=true") == errc::not_supported);
  CHECK(connect_error("memodb+tcp://127.0.0.1:1?no_such_option=1") == errc::invalid_option);
  CHECK(connect_error("memodb+tcp://127.0.0.1:1?max_requests=0") == errc::invalid_option);
  // Valid addresses connect at once (the client dials in the background).
  CHECK(connect_error("memodb+tcp://127.0.0.1:1") == std::error_code{});
  CHECK(connect_error("memodb+tcp://[::1]:1") == std::error_code{});
  CHECK(connect_error("memodb+tcp://localhost:1") == std::error_code{});
  CHECK(connect_error("memodb+ipc:///tmp/polybus-memodb-nobody-here.ipc") == std::error_code{});
}

TEST_CASE("what memodb cannot do fails with not_supported", "[memodb][adapter]") {
  auto client = connect_memodb("memodb+tcp://127.0.0.1:1?op_timeout=2s");
  CHECK(client.publish_sync("t", "x") == errc::not_supported);
  CHECK_THROWS_AS(client.subscribe("t", {}, [](Message&) {}), Error);
  std::promise<std::error_code> pinged;
  client.ping([&](std::error_code ec) { pinged.set_value(ec); });
  CHECK(pinged.get_future().get() == errc::not_supported);
}

TEST_CASE("a request with no broker fails by its deadline, a bad service name fails at once",
          "[memodb][adapter]") {
  auto client = connect_memodb("memodb+tcp://[::1]:1");
  auto reply = client.request_sync("echo", "x", 200ms);
  // connect_failed naming where it tried once a dial was seen to fail and the next one comes
  // too late for the request; a timeout when no failure was seen before the deadline.
  INFO(reply.status().message());
  if (reply.ec == errc::connect_failed)
    CHECK_THAT(reply.status().cause(), Catch::Contains("tcp://[::1]:1"));
  else
    CHECK(reply.ec == errc::timeout);
  CHECK(client.request_sync("", "x", 5s).ec == errc::invalid_argument);
  CHECK(client.request_sync(std::string(300, 's'), "x", 5s).ec == errc::invalid_argument);
  CHECK(client.request_sync("bad\xff", "x", 5s).ec == errc::invalid_argument);
  CHECK(client.stats().requests == 4);
}

TEST_CASE("serve refuses a service name the broker would drop", "[memodb][adapter]") {
  auto client = connect_memodb("memodb+ipc:///tmp/polybus-memodb-nobody-here.ipc");
  auto sub = client.serve("", [](Message&) { return std::string(); });
  CHECK(sub.wait_ready(5s) == errc::invalid_argument);
  // With no broker to reach, a valid one is not confirmed.
  auto ok = client.serve("echo", [](Message&) { return std::string(); });
  CHECK(ok.wait_ready(100ms) == errc::timeout);
}

TEST_CASE("closing completes every waiting and pending request with closed", "[memodb][adapter]") {
  auto client = connect_memodb("memodb+tcp://127.0.0.1:1?max_requests=2");
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::error_code> results;
  for (int i = 0; i < 6; ++i)
    client.request("echo", "x", 30s, [&](Reply r) {
      std::lock_guard<std::mutex> lock(mutex);
      results.push_back(r.ec);
      cv.notify_all();
    });
  // Close waits for pending requests up to its deadline, then cuts them off and says so.
  const Status closed = client.close_sync(200ms);
  CHECK(closed == errc::timeout);
  CHECK_THAT(closed.cause(), Catch::Contains("6 operation(s) unfinished"));
  std::unique_lock<std::mutex> lock(mutex);
  REQUIRE(cv.wait_for(lock, 20s, [&] { return results.size() == 6; }));
  for (auto ec : results) CHECK(ec == errc::closed);
}
