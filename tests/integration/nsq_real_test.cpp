// SPDX-License-Identifier: Apache-2.0
// The NSQ adapter against real nsqd and nsqlookupd 1.3: compression, TLS, AUTH, failover, RDY
// distribution, backoff, discovery, and a hostile server.
#include <sys/socket.h>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "nsq_harness_broker.hpp"
#include "polybus/nsq/error.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"
#include "tls_certs.hpp"

using namespace polybus;
using namespace polybus::test;
using asio::ip::tcp;

namespace {

const std::string kFast = "reconnect_initial=10ms&reconnect_max=200ms";

// GET over plain HTTP/1.0, for nsqd's /stats and the like.
std::string http_get(const std::string& address, const std::string& target) {
  asio::io_context io;
  tcp::socket socket(io);
  auto colon = address.rfind(':');
  socket.connect({asio::ip::make_address(address.substr(0, colon)),
                  static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
  std::string request = "GET " + target + " HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  asio::write(socket, asio::buffer(request));
  std::string response;
  std::error_code ec;
  asio::read(socket, asio::dynamic_buffer(response), ec);
  auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? response : response.substr(body + 4);
}

// Publishes count messages "<prefix>-i" and waits for every acknowledgement.
void publish_all(Client& client, const std::string& topic, const std::string& prefix, int count) {
  Latch done;
  std::atomic<int> failed{0};
  for (int i = 0; i < count; ++i)
    client.publish(topic, prefix + "-" + std::to_string(i), [&](std::error_code ec) {
      if (ec) ++failed;
      done.count_down();
    });
  REQUIRE(done.wait_for(count));
  REQUIRE(failed == 0);
}

Subscription collect(Client& client, const std::string& topic, Collector& into,
                     SubscribeOptions options = {}) {
  if (options.group.empty()) options.group = "tests";
  auto sub =
      client.subscribe(topic, options, [&into](Message& m) { into.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  return sub;
}

// The stats entry of nsqd's clients on a topic, as JSON text.
std::string client_stats(const NsqHarness& nsqd, const std::string& topic) {
  return http_get(nsqd.nsqd_http(), "/stats?format=json&topic=" + topic);
}

std::string port(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

void round_trip(const std::string& url, const std::string& topic, int count = 200) {
  Collector got;
  auto client = connect(url);
  auto sub = collect(client, topic, got);
  publish_all(client, topic, "m", count);
  REQUIRE(got.wait_for_distinct(count));
}

}  // namespace

TEST_CASE("snappy compresses the stream both ways with a real nsqd", "[nsq][real]") {
  NsqHarness nsqd({"-no-lookupd"});
  const std::string url = "nsq://" + nsqd.nsqd_tcp() + "?snappy=true&" + kFast;
  Collector got;
  auto client = connect(url);
  auto sub = collect(client, "snappy-topic", got);
  publish_all(client, "snappy-topic", "s", 200);
  REQUIRE(got.wait_for_distinct(200));
  CHECK(client_stats(nsqd, "snappy-topic").find("\"snappy\":true") != std::string::npos);
}

TEST_CASE("deflate compresses the stream both ways with a real nsqd", "[nsq][real]") {
  NsqHarness nsqd({"-no-lookupd"});
  const std::string url = "nsq://" + nsqd.nsqd_tcp() + "?deflate=true&deflate_level=3&" + kFast;
  Collector got;
  auto client = connect(url);
  auto sub = collect(client, "deflate-topic", got);
  publish_all(client, "deflate-topic", "d", 200);
  REQUIRE(got.wait_for_distinct(200));
  CHECK(client_stats(nsqd, "deflate-topic").find("\"deflate\":true") != std::string::npos);
}

TEST_CASE("TLS negotiated in IDENTIFY verifies nsqd against a test CA", "[nsq][real][tls]") {
  TestCertificates certs;
  NsqHarness nsqd({"-no-lookupd", "-tls-cert", certs.server_cert_file, "-tls-key",
                   certs.server_key_file, "-tls-required=true"});
  // nsqd requires TLS of every client here (its HTTP API too), so a working round trip is
  // itself the proof that the stream was upgraded.
  SECTION("with the CA it works, with snappy on top too") {
    for (std::string extra : {"", "&snappy=true"}) {
      const std::string url = "nsq://" + nsqd.nsqd_tcp() +
                              "?tls=true&tls_ca_file=" + certs.ca_file + extra + "&" + kFast;
      Collector got;
      auto client = connect(url);
      auto sub =
          collect(client, "tls-topic", got, SubscribeOptions{extra.empty() ? "plain" : "snappy"});
      publish_all(client, "tls-topic", "t" + extra, 50);
      REQUIRE(got.wait_for_distinct(50));
    }
  }
  SECTION("against an unrelated CA the connection is refused with a TLS error") {
    Latch failed;
    std::error_code seen;
    ConnectOptions options;
    options.on_state = [&](const StateEvent& e) {
      if (e.state == ConnectionState::disconnected && !seen) {
        seen = e.reason;
        failed.count_down();
      }
    };
    auto client = connect(
        "nsq://" + nsqd.nsqd_tcp() + "?tls=true&tls_ca_file=" + certs.other_ca_file + "&" + kFast,
        options);
    PublishOptions short_deadline;
    short_deadline.timeout = std::chrono::milliseconds(2000);
    // It fails for the reason the connection did, and says so.
    const Status refused = client.publish_sync("tls-topic", "x", short_deadline);
    INFO(refused.message());
    CHECK(refused == errc::tls_error);
    CHECK_THAT(refused.cause(), Catch::Contains(nsqd.nsqd_tcp()));
    REQUIRE(failed.wait_for(1));
    CHECK(seen == errc::tls_error);
  }
  SECTION("plain text is refused by a TLS-only nsqd") {
    auto client = connect("nsq://" + nsqd.nsqd_tcp() + "?" + kFast);
    PublishOptions short_deadline;
    short_deadline.timeout = std::chrono::milliseconds(1000);
    const Status refused = client.publish_sync("tls-topic", "x", short_deadline);
    INFO(refused.message());
    CHECK(refused);
    CHECK_FALSE(refused.cause().empty());
  }
}

namespace {

// nsqd's auth protocol: GET /auth?remote_ip=..&tls=..&secret=.. answers the permissions.
class AuthServer {
 public:
  explicit AuthServer(std::string secret)
      : secret_(std::move(secret)), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~AuthServer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }
  std::string address() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  int requests() const { return requests_.load(); }

 private:
  void serve() {
    for (;;) {
      tcp::socket socket(io_);
      std::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec) return;
      std::string request;
      asio::read_until(socket, asio::dynamic_buffer(request), "\r\n\r\n", ec);
      if (ec) continue;
      ++requests_;
      const bool good = request.find("secret=" + secret_ + " ") != std::string::npos ||
                        request.find("secret=" + secret_ + "&") != std::string::npos;
      std::string body =
          good
              ? R"({"ttl":3600,"identity":"tester","identity_url":"","authorizations":[{"permissions":["subscribe","publish"],"topic":".*","channels":[".*"]}]})"
              : R"({"message":"NOT_AUTHORIZED"})";
      std::string response =
          std::string(good ? "HTTP/1.1 200 OK" : "HTTP/1.1 403 Forbidden") +
          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\nConnection: close\r\n\r\n" + body;
      asio::write(socket, asio::buffer(response), ec);
    }
  }

  std::string secret_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("AUTH with the right secret is accepted and with a wrong one refused", "[nsq][real]") {
  AuthServer auth("s3cret");
  NsqHarness nsqd({"-no-lookupd", "-auth-http-address", auth.address()});
  round_trip("nsq://" + nsqd.nsqd_tcp() + "?auth_secret=s3cret&" + kFast, "auth-topic", 20);
  CHECK(auth.requests() >= 1);

  Latch refused;
  std::error_code reason;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected && !reason) {
      reason = e.reason;
      refused.count_down();
    }
  };
  auto client = connect("nsq://" + nsqd.nsqd_tcp() + "?auth_secret=wrong&" + kFast, options);
  client.publish("auth-topic", "x", nullptr);
  REQUIRE(refused.wait_for(1));
  CHECK(reason.category() == nsq::nsq_category());
}

TEST_CASE("a producer fails over to the next nsqd when the first is down", "[nsq][real]") {
  NsqHarness a({"-no-lookupd"}), b({"-no-lookupd"});
  auto producer =
      connect("nsq://" + a.nsqd_tcp() + "," + b.nsqd_tcp() + "?publish_strategy=failover&" + kFast);
  REQUIRE(producer.publish_sync("failover", "to-a") == std::error_code{});
  a.stop();
  PublishOptions options;
  options.timeout = kWaitBound;
  REQUIRE(producer.publish_sync("failover", "to-b", options) == std::error_code{});
  Collector on_b;
  auto consumer = connect("nsq://" + b.nsqd_tcp() + "?" + kFast);
  auto sub = collect(consumer, "failover", on_b);
  REQUIRE(on_b.wait_until([](const auto& seen) { return seen.count("to-b") > 0; }));
  CHECK(on_b.count("to-a") == 0);
}

TEST_CASE("a producer spreading over two nsqd routes around one that stops, losing nothing",
          "[nsq][real][publish_strategy]") {
  NsqHarness a({"-no-lookupd"}), b({"-no-lookupd"});
  auto producer = connect("nsq://" + a.nsqd_tcp() + "," + b.nsqd_tcp() + "?" + kFast);
  PublishOptions options;
  options.timeout = kWaitBound;
  for (int i = 0; i < 200; ++i)
    REQUIRE(producer.publish_sync("spread", "early-" + std::to_string(i), options) ==
            std::error_code{});
  std::uint64_t on_a = 0, on_b = 0;
  for (const auto& node : producer.metrics().publish_nodes)
    (node.address == a.nsqd_tcp() ? on_a : on_b) += node.confirmed;
  CHECK(on_a > 0);  // both took a share
  CHECK(on_b > 0);
  a.stop();
  for (int i = 0; i < 200; ++i)
    REQUIRE(producer.publish_sync("spread", "late-" + std::to_string(i), options) ==
            std::error_code{});
  Collector got;
  auto consumer = connect("nsq://" + b.nsqd_tcp() + "?" + kFast);
  auto sub = collect(consumer, "spread", got);
  REQUIRE(got.wait_until([](const auto& seen) {
    std::size_t late = 0;
    for (const auto& [payload, n] : seen) late += payload.rfind("late-", 0) == 0;
    return late == 200;
  }));
}

TEST_CASE("with more nsqd than max_in_flight no nsqd starves", "[nsq][real]") {
  NsqHarness a({"-no-lookupd"}), b({"-no-lookupd"}), c({"-no-lookupd"});
  Collector got;
  auto consumer = connect("nsq://" + a.nsqd_tcp() + "," + b.nsqd_tcp() + "," + c.nsqd_tcp() +
                          "?max_in_flight=1&rdy_redistribute_interval=50ms&" + kFast);
  auto sub = collect(consumer, "starve", got);
  for (auto* nsqd : {&a, &b, &c}) {
    auto producer = connect("nsq://" + nsqd->nsqd_tcp() + "?" + kFast);
    publish_all(producer, "starve", nsqd->nsqd_tcp(), 10);
  }
  REQUIRE(got.wait_for_distinct(30));
}

TEST_CASE("failing messages put the consumer in backoff and successes bring it back",
          "[nsq][real]") {
  NsqHarness nsqd({"-no-lookupd"});
  std::mutex mutex;
  std::vector<std::string> lines;
  ConnectOptions options;
  options.log_level = LogLevel::info;
  options.log = [&](LogLevel, std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.emplace_back(text);
  };
  Collector done;
  std::atomic<int> failures{0};
  auto client =
      connect("nsq://" + nsqd.nsqd_tcp() +
                  "?backoff_multiplier=20ms&max_backoff_duration=200ms&requeue_delay=0&" + kFast,
              options);
  SubscribeOptions sub_options;
  sub_options.group = "backoff";
  sub_options.max_in_flight = 10;
  auto sub = client.subscribe("backoff", sub_options, [&](Message& m) {
    if (failures.fetch_add(1) < 3) throw std::runtime_error("not yet");
    done.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  publish_all(client, "backoff", "b", 10);
  REQUIRE(done.wait_for_distinct(10));
  REQUIRE(done.wait_until([&](const auto&) {
    std::lock_guard<std::mutex> lock(mutex);
    bool entered = false, left = false;
    for (auto& l : lines) {
      entered = entered || l.find("backing off") != std::string::npos;
      left = left || l.find("backoff over") != std::string::npos;
    }
    return entered && left;
  }));
}

TEST_CASE("the harness is up only once nsqlookupd lists its nsqd and the topics it kept",
          "[nsq][real]") {
  // A client that asks nsqlookupd the moment a harness is up finds its nsqd: one that heard of
  // none would wait out a backoff, for ever on a clock the test holds still.
  NsqHarness harness;
  const auto listed = "\"tcp_port\":" + port(harness.nsqd_tcp());
  CHECK(http_get(harness.lookupd_http(), "/nodes").find(listed) != std::string::npos);
  {
    auto client = connect("nsq://" + harness.nsqd_tcp() + "?" + kFast);
    REQUIRE(client.publish_sync("kept", "x") == std::error_code{});
    client.close_sync(std::chrono::seconds(5));
  }
  // nsqd unregisters on its way down; after the restart the topic it reloaded is listed again
  // before anything is published to it.
  harness.stop();
  harness.start();
  CHECK(http_get(harness.lookupd_http(), "/lookup?topic=kept").find(listed) != std::string::npos);
}

TEST_CASE("nsqlookupd discovery follows nsqd appearing and disappearing", "[nsq][real]") {
  NsqHarness lookupd({"-lookupd-only"});
  NsqHarness a({"-no-lookupd", "-join-lookupd", lookupd.lookupd_tcp()});
  std::mutex mutex;
  std::vector<StateEvent> events;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(e);
  };
  auto to_a = connect("nsq://" + a.nsqd_tcp() + "?" + kFast);
  REQUIRE(to_a.publish_sync("discovered", "a-0") == std::error_code{});
  Collector got;
  auto consumer = connect("nsq+lookupd://" + lookupd.lookupd_http() +
                              "?lookupd_poll_interval=50ms&lookupd_poll_jitter=0&" + kFast,
                          options);
  auto sub = collect(consumer, "discovered", got);
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("a-0") > 0; }));

  // A second nsqd appears with the topic: the consumer finds it at the next poll.
  NsqHarness b({"-no-lookupd", "-join-lookupd", lookupd.lookupd_tcp()});
  auto to_b = connect("nsq://" + b.nsqd_tcp() + "?" + kFast);
  REQUIRE(to_b.publish_sync("discovered", "b-0") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("b-0") > 0; }));

  // It disappears: its connection ends and the consumer goes on with the first.
  to_b.close_sync(std::chrono::seconds(5));
  b.stop();
  REQUIRE(to_a.publish_sync("discovered", "a-1") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("a-1") > 0; }));
  std::lock_guard<std::mutex> lock(mutex);
  bool b_connected = false, b_disconnected = false;
  for (auto& e : events) {
    if (e.endpoint.find(port(b.nsqd_tcp())) == std::string::npos) continue;
    b_connected = b_connected || e.state == ConnectionState::connected;
    b_disconnected = b_disconnected || e.state == ConnectionState::disconnected;
  }
  CHECK(b_connected);
  CHECK(b_disconnected);
}

TEST_CASE("a hostile nsqd sending an absurd frame size is dropped and retried", "[nsq][hostile]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::atomic<int> accepted{0};
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {
      tcp::socket socket(io);
      std::error_code ec;
      acceptor.accept(socket, ec);
      if (ec) return;
      ++accepted;
      char buffer[4096];
      socket.read_some(asio::buffer(buffer), ec);                          // magic and IDENTIFY
      const unsigned char frame[] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};  // 2 GiB "response"
      asio::write(socket, asio::buffer(frame), ec);
      socket.read_some(asio::buffer(buffer), ec);  // until the client hangs up
    }
  });
  Latch errors;
  std::error_code first_error;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) {
      if (!first_error) first_error = e.reason;
      errors.count_down();
    }
  };
  {
    auto client =
        connect("nsq://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()) + "?" + kFast,
                options);
    client.publish("t", "x", nullptr);
    REQUIRE(errors.wait_for(2));  // dropped twice: it reconnected after the first
  }
  ::shutdown(acceptor.native_handle(), SHUT_RDWR);
  server.join();
  CHECK(accepted == 2);
  CHECK(first_error == nsq::errc::frame_too_large);
}
