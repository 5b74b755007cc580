// SPDX-License-Identifier: Apache-2.0
// The NSQ adapter against the in-process nsqd and nsqlookupd, and against a fake nsqd that
// goes silent: heartbeats, clean close, RDY spread, discovery, restarts. No real server needed.
#include <sys/socket.h>
#include <algorithm>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "polybus/nsq/error.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;
using asio::ip::tcp;
using nsq::testing::Lookupd;
using nsq::testing::Nsqd;

namespace {
const std::string kFast = "reconnect_initial=5ms&reconnect_max=50ms";

// An nsqd that times a message out after 1 s, its least msg_timeout.
std::unique_ptr<Nsqd> start_nsqd_with_least_msg_timeout() {
  nsq::testing::NsqdOptions broker;
  broker.msg_timeout = std::chrono::milliseconds(1000);
  return Nsqd::start(broker);
}

// One handler thread, ten messages in flight.
SubscribeOptions one_handler_thread(const std::string& group) {
  SubscribeOptions options;
  options.group = group;
  options.max_in_flight = 10;
  options.concurrency = 1;
  return options;
}
}  // namespace

TEST_CASE("nsq: silence for twice the heartbeat interval drops the connection and reconnects",
          "[nsq][heartbeat]") {
  // A fake nsqd: answers IDENTIFY with a 1 s heartbeat agreement, then says nothing at all.
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::atomic<int> accepted{0};
  Latch connections;
  std::thread server([&] {
    std::vector<tcp::socket> keep;
    for (int i = 0; i < 2; ++i) {
      tcp::socket socket(io);
      std::error_code ec;
      acceptor.accept(socket, ec);
      if (ec) break;
      ++accepted;
      connections.count_down();
      char buffer[4096];
      socket.read_some(asio::buffer(buffer), ec);
      const std::string body = R"({"max_rdy_count":2500,"version":"1.3.0"})";
      std::string frame(8, '\0');
      auto size = static_cast<std::uint32_t>(body.size() + 4);
      frame[0] = static_cast<char>(size >> 24), frame[1] = static_cast<char>(size >> 16);
      frame[2] = static_cast<char>(size >> 8), frame[3] = static_cast<char>(size);
      asio::write(socket, asio::buffer(frame + body), ec);
      keep.push_back(std::move(socket));  // open and silent
    }
  });
  Latch dropped;
  std::error_code reason;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected && !reason) {
      reason = e.reason;
      dropped.count_down();
    }
  };
  auto start = std::chrono::steady_clock::now();
  {
    auto client = connect("nsq://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()) +
                              "?heartbeat_interval=1s&" + kFast,
                          options);
    client.publish("t", "x", nullptr);
    REQUIRE(dropped.wait_for(1));
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(2000));
    CHECK(reason == errc::timeout);
    CHECK(connections.wait_for(2));  // and it connects again
  }
  ::shutdown(acceptor.native_handle(), SHUT_RDWR);
  server.join();
  CHECK(accepted == 2);
}

TEST_CASE("nsq: close sends CLS, finishes in-flight messages and leaves nothing in flight",
          "[nsq]") {
  auto nsqd = Nsqd::start();
  Collector got;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  SubscribeOptions options;
  options.group = "closing";
  options.max_in_flight = 50;
  auto sub = client.subscribe("close-topic", options,
                              [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 200; ++i) client.publish("close-topic", std::to_string(i), nullptr);
  REQUIRE(got.wait_for_distinct(200));
  REQUIRE(client.close_sync(std::chrono::seconds(10)) == std::error_code{});
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 0; }));
  CHECK(nsqd->in_flight("close-topic", "closing") == 0);
  CHECK(nsqd->channel_depth("close-topic", "closing") == 0);
}

TEST_CASE("nsq: max_in_flight below the number of nsqd still drains every nsqd", "[nsq][rdy]") {
  std::vector<std::unique_ptr<Nsqd>> nsqds;
  std::string hosts;
  for (int i = 0; i < 4; ++i) {
    nsqds.push_back(Nsqd::start());
    hosts += (i ? "," : "") + nsqds.back()->tcp_address();
  }
  Collector got;
  auto consumer =
      connect("nsq://" + hosts + "?max_in_flight=2&rdy_redistribute_interval=20ms&" + kFast);
  SubscribeOptions options;
  options.group = "spread";
  auto sub =
      consumer.subscribe("spread", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (auto& nsqd : nsqds) {
    auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
    for (int i = 0; i < 10; ++i)
      REQUIRE(producer.publish_sync("spread", nsqd->tcp_address() + "/" + std::to_string(i)) ==
              std::error_code{});
  }
  REQUIRE(got.wait_for_distinct(40));
  // RDY stays within max_in_flight in total: with all four subscribed, the RDY counts the nsqd
  // hold add up to at most 2 (RDY max_in_flight on every connection would hold 8), no
  // connection ever got more than 2, and every nsqd was served. Re-checked as nsqd 0's state
  // changes: a rotation in flight may show one RDY 1 early for a moment.
  const bool within = nsqds[0]->wait_until([&] {
    std::int64_t sum = 0;
    for (auto& nsqd : nsqds) sum += nsqd->ready_count("spread", "spread");
    return sum >= 1 && sum <= 2;
  });
  CHECK(within);
  for (auto& nsqd : nsqds) {
    CHECK(nsqd->max_ready_count("spread", "spread") <= 2);
    CHECK(nsqd->channel_depth("spread", "spread") == 0);
  }
}

TEST_CASE("nsq: set_max_in_flight(0) pauses and a larger value resumes", "[nsq][rdy]") {
  auto nsqd = Nsqd::start();
  Collector got;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  SubscribeOptions options;
  options.group = "flow";
  auto sub =
      client.subscribe("flow", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  sub.set_max_in_flight(0);
  for (int i = 0; i < 5; ++i)
    REQUIRE(client.publish_sync("flow", std::to_string(i)) == std::error_code{});
  REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("flow", "flow") == 5; }));
  CHECK(got.total() == 0);
  sub.set_max_in_flight(3);
  REQUIRE(got.wait_for_distinct(5));
}

TEST_CASE("nsq: an nsqd restart mid-stream loses nothing that was acknowledged", "[nsq][restart]") {
  auto nsqd = Nsqd::start();
  const std::string url = "nsq://" + nsqd->tcp_address() + "?" + kFast;
  Collector got;
  std::mutex mutex;
  std::set<std::string> acked;
  Latch done;
  auto consumer = connect(url);
  auto producer = connect(url);
  SubscribeOptions options;
  options.group = "durable";
  options.max_in_flight = 100;
  auto sub = consumer.subscribe("restart", options,
                                [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  PublishOptions publish_options;
  publish_options.timeout = std::chrono::seconds(20);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 300; ++i) {
      std::string payload = std::to_string(round) + "-" + std::to_string(i);
      producer.publish("restart", payload, publish_options, [&, payload](std::error_code ec) {
        if (!ec) {
          std::lock_guard<std::mutex> lock(mutex);
          acked.insert(payload);
        }
        done.count_down();
      });
    }
    REQUIRE(done.wait_for(static_cast<std::size_t>(300 * (round + 1))));
    nsqd->restart();
  }
  std::set<std::string> expected;
  {
    std::lock_guard<std::mutex> lock(mutex);
    expected = acked;
  }
  // Publishes written just as nsqd went away fail (disconnected); the rest must all arrive.
  CHECK(expected.size() > 300);
  REQUIRE(got.wait_until([&](const auto& seen) {
    for (auto& p : expected)
      if (!seen.count(p)) return false;
    return true;
  }));
}

TEST_CASE("nsq+lookupd: producers appear and disappear through the in-process nsqlookupd",
          "[nsq][lookupd]") {
  auto lookupd = Lookupd::start();
  auto a = Nsqd::start();
  a->register_with(*lookupd);
  Collector got;
  auto producer_a = connect("nsq://" + a->tcp_address() + "?" + kFast);
  REQUIRE(producer_a.publish_sync("found", "a0") == std::error_code{});
  auto consumer = connect("nsq+lookupd://" + lookupd->http_address() +
                          "?lookupd_poll_interval=20ms&lookupd_poll_jitter=0&" + kFast);
  SubscribeOptions options;
  options.group = "finders";
  auto sub =
      consumer.subscribe("found", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("a0") > 0; }));
  auto b = Nsqd::start();
  b->register_with(*lookupd);
  auto producer_b = connect("nsq://" + b->tcp_address() + "?" + kFast);
  REQUIRE(producer_b.publish_sync("found", "b0") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("b0") > 0; }));
  b->stop();  // unregisters: the consumer retires its connection to b
  REQUIRE(b->wait_until([&] { return b->client_count() == 0; }));
  REQUIRE(producer_a.publish_sync("found", "a1") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("a1") > 0; }));
  // Publishing through nsqlookupd finds an nsqd by /nodes.
  auto via_lookupd = connect("nsq+lookupd://" + lookupd->http_address() + "?" + kFast);
  REQUIRE(via_lookupd.publish_sync("found", "through-lookupd") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("through-lookupd") > 0; }));
}

TEST_CASE(
    "nsq+lookupd: a publisher dials a known nsqd once its backoff has run out, while asking "
    "nsqlookupd again still waits out a longer one",
    "[nsq][lookupd][clock]") {
  using namespace std::chrono_literals;
  auto lookupd = Lookupd::start();
  auto nsqd = Nsqd::start();
  nsqd->register_with(*lookupd);
  auto clock = std::make_shared<ManualClock>();
  StateRecorder states;
  ConnectOptions options;
  options.clock = clock;
  options.on_state = states.callback();
  // The nsqd's retry is scheduled first, when its connection closes; asking nsqlookupd again,
  // once every nsqd known failed, next. The second wait is the longer one.
  auto delays = std::make_shared<std::atomic<int>>(0);
  options.reconnect_backoff = Backoff::custom([delays](std::uint32_t) -> std::chrono::milliseconds {
    return ++*delays == 1 ? std::chrono::milliseconds(1min) : std::chrono::milliseconds(10min);
  });
  auto client = connect("nsq+lookupd://" + lookupd->http_address(), options);
  Latch sent;
  Status result;
  client.publish("kept", "first", [&](const Status& status) {
    result = status;
    sent.count_down();
  });
  REQUIRE(sent.wait_for(1));
  REQUIRE_FALSE(result);

  nsqd->stop();
  const auto retrying = [](std::chrono::milliseconds wait) {
    return [wait](const StateEvent& e) {
      return e.state == ConnectionState::reconnecting && e.retry_in == wait;
    };
  };
  REQUIRE(states.wait_for(retrying(1min)));
  REQUIRE(states.wait_for(retrying(10min)));
  nsqd->resume();
  clock->advance(1min);
  // The nsqd's backoff has run out: it is dialled, and the publish goes nine minutes before
  // nsqlookupd is asked again. Asynchronous: a publish_sync would wait on the manual clock.
  client.publish("kept", "second", [&](const Status& status) {
    result = status;
    sent.count_down();
  });
  REQUIRE(sent.wait_for(2));
  CHECK_FALSE(result);
  client.close_sync(5s);
}

TEST_CASE("nsq: a refused first connection whose retry comes after connect_timeout fails at once",
          "[nsq]") {
  // A port nobody listens on: the first attempt is refused and NSQ's reconnect policy waits
  // 8 s, past the 5 s connect_timeout, so no attempt left can connect in time.
  asio::io_context io;
  tcp::acceptor closed_port(io, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = closed_port.local_endpoint().port();
  closed_port.close();
  auto client = connect("nsq://127.0.0.1:" + std::to_string(port));
  const auto start = std::chrono::steady_clock::now();
  const Status failed = client.publish_sync("t", "x", PublishOptions{std::chrono::seconds(20), {}});
  INFO(failed.message());
  CHECK(failed == errc::connect_failed);
  CHECK_THAT(failed.cause(), Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                                 Catch::Contains("connection refused"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not connect_timeout
}

TEST_CASE("nsq: an nsqd whose max_rdy_count is below max_in_flight gets RDY within its limit",
          "[nsq][rdy]") {
  nsq::testing::NsqdOptions small;
  small.max_rdy_count = 5;  // RDY above it is a fatal E_INVALID on nsqd
  auto nsqd = Nsqd::start(small);
  std::atomic<int> disconnects{0};
  ConnectOptions options;
  options.options = Options{{"max_in_flight", "50"}};
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) ++disconnects;
  };
  Collector got;
  auto consumer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast, options);
  SubscribeOptions group;
  group.group = "limited";
  auto sub =
      consumer.subscribe("limited", group, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  for (int i = 0; i < 30; ++i)
    REQUIRE(producer.publish_sync("limited", "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(got.wait_for_distinct(30));
  // Clamped to what IDENTIFY said, not refused: RDY 5 at most, and the connection never dropped.
  CHECK(nsqd->max_ready_count("limited", "limited") == 5);
  CHECK(disconnects == 0);
}

TEST_CASE(
    "nsq: a burst gathered into one MPUB that nsqd refuses for one message fails only that "
    "one, the rest are kept once each",
    "[nsq][publish]") {
  nsq::testing::NsqdOptions small;
  small.max_msg_size = 100;  // E_BAD_MESSAGE for the whole MPUB holding the 150-byte one
  auto nsqd = Nsqd::start(small);
  auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  REQUIRE(producer.publish_sync("split", "warm") == std::error_code{});
  Latch completed;
  std::mutex mutex;
  std::vector<Status> statuses(20);
  // Published from a completion, on the client's strand: one burst, so one MPUB.
  producer.publish("split", "first", [&](const Status& first) {
    REQUIRE_FALSE(first);
    for (int i = 0; i < 20; ++i) {
      const std::string payload = i == 7 ? std::string(150, 'x') : "m" + std::to_string(i);
      producer.publish("split", payload, [&, i](const Status& status) {
        std::lock_guard<std::mutex> lock(mutex);
        statuses[static_cast<std::size_t>(i)] = status;
        completed.count_down();
      });
    }
  });
  REQUIRE(completed.wait_for(20));
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      INFO("publish " << i << ": " << statuses[i].message());
      if (i == 7) {
        CHECK(statuses[i] == make_error_code(nsq::errc::e_bad_message));
        CHECK_THAT(statuses[i].cause(), Catch::Contains("too big"));
      } else {
        CHECK_FALSE(statuses[i]);
      }
    }
  }
  CHECK(nsqd->topic_message_count("split") == 2 + 19);  // warm, first, and 19 of the burst
  Collector got;
  SubscribeOptions group;
  group.group = "all";
  auto consumer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  auto sub =
      consumer.subscribe("split", group, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(got.wait_for_distinct(21));
  CHECK(got.total() == 21);  // each once
}

TEST_CASE("nsq: a handler that keeps failing is requeued with a growing delay up to its cap",
          "[nsq][requeue]") {
  auto nsqd = Nsqd::start();
  Latch fifth;
  std::atomic<int> deliveries{0};
  // The failures also back the consumer off (RDY 0 for backoff_multiplier x 2^(n-1)): kept
  // short, so the test waits on nsqd's deliveries, not on the production default of 1 s.
  auto client = connect("nsq://" + nsqd->tcp_address() +
                        "?requeue_delay=20ms&max_requeue_delay=50ms&max_attempts=0&"
                        "backoff_multiplier=5ms&max_backoff_duration=20ms&" +
                        kFast);
  SubscribeOptions group;
  group.group = "failing";
  auto sub = client.subscribe("failing", group, [&](Message&) {
    if (++deliveries == 5) fifth.count_down();
    if (deliveries <= 5) throw std::runtime_error("fails");
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("failing", "x") == std::error_code{});
  REQUIRE(fifth.wait_for(1));
  // requeue_delay per attempt so far (20, 40) and then max_requeue_delay (50, 50): what nsqd
  // was asked for in each REQ.
  REQUIRE(nsqd->wait_until([&] { return nsqd->requeue_count("failing", "failing") >= 4; }));
  auto delays = nsqd->requeue_delays("failing", "failing");
  REQUIRE(delays.size() >= 4);
  using std::chrono::milliseconds;
  CHECK(delays[0] == milliseconds(20));
  CHECK(delays[1] == milliseconds(40));
  CHECK(delays[2] == milliseconds(50));
  CHECK(delays[3] == milliseconds(50));
}

// Counts a client's disconnects and protocol errors (the RDY check's verdict).
struct DropWatch {
  std::atomic<int> disconnects{0};
  std::atomic<int> protocol_errors{0};
  ConnectOptions options() {
    ConnectOptions options;
    options.on_state = [this](const StateEvent& e) {
      if (e.state == ConnectionState::disconnected) ++disconnects;
    };
    options.on_error = [this](std::error_code ec, const std::string&) {
      if (ec == errc::protocol_error) ++protocol_errors;
    };
    return options;
  }
};

TEST_CASE(
    "nsq: a message held past msg_timeout does not count against RDY once nsqd timed it "
    "out: its redelivery is taken, the connection stays",
    "[nsq][rdy]") {
  nsq::testing::NsqdOptions short_timeout;
  short_timeout.msg_timeout = std::chrono::milliseconds(200);
  auto nsqd = Nsqd::start(short_timeout);
  DropWatch watch;
  ConnectOptions options = watch.options();
  auto& disconnects = watch.disconnects;
  auto& protocol_errors = watch.protocol_errors;
  Message held;
  Latch first, redelivered;
  std::atomic<int> deliveries{0};
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast, options);
  SubscribeOptions one;
  one.group = "held";
  one.max_in_flight = 1;  // RDY 1: the redelivery is a second message "in flight" to the client
  auto sub = client.subscribe("held", one, [&](Message& m) {
    if (++deliveries == 1) {
      m.take_manual_control();
      held = m;  // never answered before nsqd times it out
      first.count_down();
    } else {
      redelivered.count_down();
    }
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("held", "slow") == std::error_code{});
  REQUIRE(first.wait_for(1));
  REQUIRE(redelivered.wait_for(1));
  REQUIRE(nsqd->wait_until([&] { return nsqd->timeout_count("held", "held") >= 1; }));
  CHECK(disconnects == 0);
  CHECK(protocol_errors == 0);
  CHECK(held.ack() == std::error_code{});  // too late (E_FIN_FAILED), still no disconnect
  REQUIRE(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
  CHECK(disconnects == 0);
}

TEST_CASE(
    "nsq: an answer to a timed-out copy finishes its redelivery at nsqd, which then "
    "sends the next message: that is not taken for a server ignoring RDY",
    "[nsq][rdy]") {
  nsq::testing::NsqdOptions short_timeout;
  // Long enough that the next message arrives well within 13/16 of it after the redelivery, so
  // a client still counting the redelivered copy would take it for a second one over RDY 1.
  short_timeout.msg_timeout = std::chrono::milliseconds(1000);
  auto nsqd = Nsqd::start(short_timeout);
  DropWatch watch;
  ConnectOptions options = watch.options();
  auto& disconnects = watch.disconnects;
  auto& protocol_errors = watch.protocol_errors;
  Message first_copy, second_copy;
  Latch first, redelivered, next;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast, options);
  SubscribeOptions one;
  one.group = "copies";
  one.max_in_flight = 1;
  auto sub = client.subscribe("copies", one, [&](Message& m) {
    if (m.payload() == "next") return next.count_down();
    m.take_manual_control();
    if (m.attempts() == 1) {
      first_copy = m;  // held until nsqd times it out and sends it again
      first.count_down();
    } else {
      second_copy = m;
      redelivered.count_down();
    }
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("copies", "slow") == std::error_code{});
  REQUIRE(first.wait_for(1));
  REQUIRE(redelivered.wait_for(1));
  // nsqd applies FIN by id: this finishes the copy it has in flight, the second one.
  CHECK(first_copy.ack() == std::error_code{});
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("copies", "copies") == 0; }));
  REQUIRE(client.publish_sync("copies", "next") == std::error_code{});
  REQUIRE(next.wait_for(1));
  CHECK(protocol_errors == 0);
  CHECK(disconnects == 0);
  CHECK(second_copy.ack() == std::error_code{});  // E_FIN_FAILED at nsqd, an error event only
  REQUIRE(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
  CHECK(protocol_errors == 0);
  CHECK(disconnects == 0);
}

TEST_CASE(
    "nsq: an ack after nsqd timed the message out is E_FIN_FAILED: reported, the "
    "connection stays and the redelivery is handled",
    "[nsq][fin]") {
  nsq::testing::NsqdOptions short_timeout;
  short_timeout.msg_timeout = std::chrono::milliseconds(200);  // what a client not asking gets
  auto nsqd = Nsqd::start(short_timeout);
  std::atomic<int> disconnects{0};
  std::mutex mutex;
  std::vector<std::pair<std::error_code, std::string>> errors;
  Latch fin_failed, second;
  ConnectOptions options;
  options.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) ++disconnects;
  };
  options.on_error = [&](std::error_code ec, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.emplace_back(ec, what);
    if (ec == nsq::errc::e_fin_failed) fin_failed.count_down();
  };
  Message held;
  Latch first;
  std::atomic<int> deliveries{0};
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast, options);
  SubscribeOptions group;
  group.group = "late";
  auto sub = client.subscribe("late", group, [&](Message& m) {
    if (++deliveries == 1) {
      m.take_manual_control();
      held = m;  // acked only after nsqd gave up on it
      first.count_down();
    } else {
      second.count_down();
    }
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("late", "slow") == std::error_code{});
  REQUIRE(first.wait_for(1));
  REQUIRE(nsqd->wait_until([&] { return nsqd->timeout_count("late", "late") >= 1; }));
  CHECK(held.ack() == std::error_code{});  // sent; nsqd's answer comes as an error event
  REQUIRE(fin_failed.wait_for(1));
  REQUIRE(second.wait_for(1));
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = std::find_if(errors.begin(), errors.end(),
                           [](const auto& e) { return e.first == nsq::errc::e_fin_failed; });
    REQUIRE(it != errors.end());
    CHECK_THAT(it->second, Catch::Contains("E_FIN_FAILED"));
  }
  CHECK(disconnects == 0);
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("late", "late") == 0; }));
  CHECK(nsqd->channel_depth("late", "late") == 0);
}

TEST_CASE(
    "nsq+lookupd: producers of several nsqlookupd are unioned, and one down is reported "
    "while the others serve",
    "[nsq][lookupd]") {
  auto first = Lookupd::start();
  auto second = Lookupd::start();
  auto a = Nsqd::start();
  auto b = Nsqd::start();
  a->register_with(*first);
  b->register_with(*second);
  // A port nobody listens on, as a third nsqlookupd that is down.
  asio::io_context io;
  tcp::acceptor closed(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::string down = "127.0.0.1:" + std::to_string(closed.local_endpoint().port());
  closed.close();
  for (auto* nsqd : {a.get(), b.get()}) {
    auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
    REQUIRE(producer.publish_sync("union", nsqd->tcp_address()) == std::error_code{});
  }
  std::mutex mutex;
  std::vector<std::string> logged;
  ConnectOptions options;
  options.log = [&](LogLevel, std::string_view line) {
    std::lock_guard<std::mutex> lock(mutex);
    logged.emplace_back(line);
  };
  Collector got;
  auto consumer =
      connect("nsq+lookupd://" + first->http_address() + "," + down + "," + second->http_address() +
                  "?lookupd_poll_interval=20ms&lookupd_poll_jitter=0&" + kFast,
              options);
  SubscribeOptions group;
  group.group = "union";
  auto sub =
      consumer.subscribe("union", group, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_for_distinct(2));
  CHECK(got.count(a->tcp_address()) == 1);
  CHECK(got.count(b->tcp_address()) == 1);
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(std::any_of(logged.begin(), logged.end(), [&](const std::string& line) {
    return line.find("nsqlookupd " + down) != std::string::npos &&
           line.find("refused") != std::string::npos;
  }));
}

TEST_CASE(
    "nsq+lookupd: an nsqd nsqlookupd stops listing is retired (RDY 0, its messages "
    "finished, CLS) while it keeps running",
    "[nsq][lookupd]") {
  auto lookupd = Lookupd::start();
  auto kept = Nsqd::start();
  auto retired = Nsqd::start();
  kept->register_with(*lookupd);
  // Announced by hand, so it can be withdrawn while the nsqd keeps serving.
  lookupd->add_producer("retire", "127.0.0.1", retired->tcp_port());
  // Declared before the clients: handlers may still run while the clients close.
  Collector got;
  Latch holding;
  Message held;
  auto consumer = connect("nsq+lookupd://" + lookupd->http_address() +
                          "?lookupd_poll_interval=20ms&lookupd_poll_jitter=0&" + kFast);
  SubscribeOptions group;
  group.group = "retire";
  auto sub = consumer.subscribe("retire", group, [&](Message& m) {
    got.add(std::string(m.payload()));
    if (m.payload() == "held") {
      m.take_manual_control();  // still in flight when nsqlookupd withdraws its nsqd
      held = m;
      holding.count_down();
    }
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(retired->wait_until([&] { return retired->subscriber_count("retire", "retire") == 1; }));
  auto to_retired = connect("nsq://" + retired->tcp_address() + "?" + kFast);
  REQUIRE(to_retired.publish_sync("retire", "held") == std::error_code{});
  REQUIRE(holding.wait_for(1));

  lookupd->remove_producer("retire", "127.0.0.1", retired->tcp_port());
  // RDY 0 first: nothing more is taken from it ...
  REQUIRE(retired->wait_until([&] { return retired->ready_count("retire", "retire") == 0; }));
  // ... what it gave is finished there (closing at once would send it back to the channel) ...
  CHECK(held.ack() == std::error_code{});
  // ... and then the subscription there ends, though nsqd is up and would go on.
  REQUIRE(retired->wait_until([&] {
    return retired->subscriber_count("retire", "retire") == 0 &&
           retired->in_flight("retire", "retire") == 0;
  }));
  CHECK(retired->running());
  CHECK(retired->channel_depth("retire", "retire") == 0);
  CHECK(retired->requeue_count("retire", "retire") == 0);
  CHECK(retired->timeout_count("retire", "retire") == 0);
  // What reaches the retired nsqd now stays there; the listed one still delivers.
  REQUIRE(to_retired.publish_sync("retire", "after") == std::error_code{});
  auto to_kept = connect("nsq://" + kept->tcp_address() + "?" + kFast);
  REQUIRE(to_kept.publish_sync("retire", "kept") == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("kept") > 0; }));
  CHECK(retired->channel_depth("retire", "retire") == 1);
  CHECK(got.count("after") == 0);
}

TEST_CASE(
    "nsq: a failed message backs off: RDY 0 for the wait, RDY 1 to test, then the full "
    "count again",
    "[nsq][backoff]") {
  auto nsqd = Nsqd::start();
  Collector handled;
  std::atomic<int> deliveries{0};
  auto client = connect("nsq://" + nsqd->tcp_address() +
                        "?backoff_multiplier=50ms&max_backoff_duration=200ms&requeue_delay=0&"
                        "max_in_flight=8&" +
                        kFast);
  SubscribeOptions group;
  group.group = "backoff";
  auto sub = client.subscribe("backoff", group, [&](Message& m) {
    if (++deliveries == 1) throw std::runtime_error("fails once");
    handled.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  auto told_in_order = [&](const std::vector<std::int64_t>& expected) {
    return [&nsqd, expected] {
      std::size_t matched = 0;
      for (auto count : nsqd->ready_counts_set("backoff", "backoff"))
        if (matched < expected.size() && count == expected[matched]) ++matched;
      return matched == expected.size();
    };
  };
  REQUIRE(client.publish_sync("backoff", "x") == std::error_code{});
  REQUIRE(handled.wait_for_distinct(1));
  // The full count, 0 while backing off, then 1 to test the water (as go-nsq, a message handled
  // during the wait does not count: the next one decides) ...
  REQUIRE(nsqd->wait_until(told_in_order({8, 0, 1})));
  // ... and a success on that test brings the full count back.
  REQUIRE(client.publish_sync("backoff", "y") == std::error_code{});
  REQUIRE(handled.wait_for_distinct(2));
  const bool in_order = nsqd->wait_until(told_in_order({8, 0, 1, 8}));
  auto told = nsqd->ready_counts_set("backoff", "backoff");
  std::string text;
  for (auto count : told) text += std::to_string(count) + " ";
  INFO("RDY counts set: " << text);
  CHECK(in_order);
}

TEST_CASE(
    "nsq: paused while the budget holds, the handler gets nothing more and RDY stays 0 "
    "until resume",
    "[nsq][rdy][flow]") {
  auto nsqd = Nsqd::start();
  std::promise<void> gate;
  auto gate_open = gate.get_future().share();
  std::atomic<int> handled{0}, returned{0};
  Latch entered;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?max_held_messages=2&" + kFast);
  auto sub = client.subscribe("flow", one_handler_thread("flow"), [&](Message&) {
    if (handled++ == 0) {
      entered.count_down();
      gate_open.wait();  // the rest queue up past max_held_messages
    }
    ++returned;
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 10; ++i) REQUIRE(client.publish_sync("flow", "m") == std::error_code{});
  // The budget holds: RDY 0. The first message is in the handler: a pause before that would
  // hold it too.
  REQUIRE(entered.wait_for(1));
  REQUIRE(nsqd->wait_until([&] { return nsqd->ready_count("flow", "flow") == 0; }));
  sub.pause();  // the application's own pause, while the budget holds
  gate.set_value();
  // The first handler returned and nsqd read its FIN; what else was delivered waits here,
  // unacknowledged, for resume().
  REQUIRE(nsqd->wait_until([&] {
    return returned == 1 && sub.pending() > 0 && nsqd->in_flight("flow", "flow") == sub.pending();
  }));
  CHECK(handled == 1);
  auto told = nsqd->ready_counts_set("flow", "flow");
  const auto first_zero = std::find(told.begin(), told.end(), 0);
  REQUIRE(first_zero != told.end());
  CHECK(std::all_of(first_zero, told.end(), [](std::int64_t n) { return n == 0; }));
  CHECK(nsqd->ready_count("flow", "flow") == 0);
  sub.resume();
  REQUIRE(nsqd->wait_until([&] { return handled == 10; }));
  REQUIRE(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

TEST_CASE("nsq: what a long pause holds is touched, so nsqd does not send it again",
          "[nsq][flow]") {
  auto nsqd = start_nsqd_with_least_msg_timeout();
  std::promise<void> gate;
  auto gate_open = gate.get_future().share();
  Collector handled;
  Latch entered;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  auto sub = client.subscribe("held", one_handler_thread("held"), [&](Message& m) {
    if (m.payload() == "m0") {
      entered.count_down();
      gate_open.wait();  // the others arrive meanwhile
    }
    handled.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 5; ++i)
    REQUIRE(client.publish_sync("held", "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("held", "held") == 5; }));
  // m0 is in the handler (a pause before it got there would hold it too, and nothing would be
  // handled until resume).
  REQUIRE(entered.wait_for(1));
  sub.pause();
  gate.set_value();
  REQUIRE(handled.wait_for_distinct(1));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("held", "held") == 4; }));
  // Held past twice msg_timeout (a bound: nothing is expected to happen in it).
  const bool timed_out = nsqd->wait_until([&] { return nsqd->timeout_count("held", "held") > 0; },
                                          std::chrono::milliseconds(2500));
  CHECK_FALSE(timed_out);
  CHECK(handled.total() == 1);
  sub.resume();
  REQUIRE(handled.wait_for_distinct(5));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("held", "held") == 0; }));
  CHECK(handled.total() == 5);  // each once
  CHECK(nsqd->timeout_count("held", "held") == 0);
  REQUIRE(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

TEST_CASE(
    "nsq: what a long pause holds is touched, those the handler thread took together with the "
    "running message too",
    "[nsq][flow]") {
  // m0..m4 queue behind a handler busy with "first"; when it returns, its thread takes m0 with
  // the four behind it, and m0's handler runs through a pause longer than msg_timeout, touching
  // its own message as a long handler does. The four it took wait as the queue does.
  auto nsqd = start_nsqd_with_least_msg_timeout();
  std::promise<void> first_gate, m0_gate;
  auto first_open = first_gate.get_future().share();
  auto m0_open = m0_gate.get_future().share();
  Collector handled;
  Latch first_entered, m0_entered;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  auto sub = client.subscribe("ahead", one_handler_thread("ahead"), [&](Message& m) {
    if (m.payload() == "first") {
      first_entered.count_down();
      first_open.wait();
    } else if (m.payload() == "m0") {
      m0_entered.count_down();
      while (m0_open.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready)
        m.touch();
    }
    handled.add(std::string(m.payload()));
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("ahead", "first") == std::error_code{});
  REQUIRE(first_entered.wait_for(1));
  for (int i = 0; i < 5; ++i)
    REQUIRE(client.publish_sync("ahead", "m" + std::to_string(i)) == std::error_code{});
  REQUIRE(eventually([&] { return sub.pending() == 6; }));  // "first" running, five queued
  first_gate.set_value();
  REQUIRE(m0_entered.wait_for(1));
  sub.pause();
  // Held past twice msg_timeout (a bound: nothing is expected to happen in it).
  const bool timed_out = nsqd->wait_until([&] { return nsqd->timeout_count("ahead", "ahead") > 0; },
                                          std::chrono::milliseconds(2500));
  CHECK_FALSE(timed_out);
  m0_gate.set_value();
  sub.resume();
  REQUIRE(handled.wait_for_distinct(6));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("ahead", "ahead") == 0; }));
  CHECK(handled.total() == 6);  // each once
  CHECK(nsqd->timeout_count("ahead", "ahead") == 0);
  REQUIRE(client.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

namespace {
// Publishes `count` messages "prefix-N", at most `window` unanswered at once; true when every
// one completed without error. `midway` runs once, after half were published.
bool publish_windowed(Client& client, const std::string& topic, const std::string& prefix,
                      int count, const std::function<void()>& midway = {}) {
  constexpr int kWindow = 2000;
  std::mutex mutex;
  std::condition_variable cv;
  int outstanding = 0, failed = 0;
  for (int i = 0; i < count; ++i) {
    if (i == count / 2 && midway) midway();
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (!cv.wait_for(lock, kWaitBound, [&] { return outstanding < kWindow; })) return false;
      ++outstanding;
    }
    client.publish(topic, prefix + "-" + std::to_string(i), [&](const Status& s) {
      std::lock_guard<std::mutex> lock(mutex);
      --outstanding;
      if (s) ++failed;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  return cv.wait_for(lock, kWaitBound, [&] { return outstanding == 0; }) && failed == 0;
}
}  // namespace

TEST_CASE(
    "nsq: round_robin spreads publishes evenly over three nsqd and routes around one "
    "stopped mid-run, losing nothing",
    "[nsq][publish_strategy]") {
  std::vector<std::unique_ptr<Nsqd>> nsqds;
  std::string hosts;
  for (int i = 0; i < 3; ++i) {
    nsqds.push_back(Nsqd::start());
    hosts += (i ? "," : "") + nsqds.back()->tcp_address();
  }
  auto producer = connect("nsq://" + hosts + "?publish_strategy=round_robin&" + kFast);
  constexpr int kEach = 30000;
  REQUIRE(publish_windowed(producer, "spread", "even", kEach));
  for (auto& nsqd : nsqds) {
    const auto got = nsqd->topic_message_count("spread");
    INFO(nsqd->tcp_address() << " took " << got);
    CHECK(got >= kEach / 3 * 95 / 100);
    CHECK(got <= kEach / 3 * 105 / 100);
  }
  const auto nodes = producer.metrics().publish_nodes;
  REQUIRE(nodes.size() == 3);
  std::uint64_t confirmed = 0;
  for (const auto& node : nodes) {
    CHECK(node.state == "ready");
    confirmed += node.confirmed;
  }
  CHECK(confirmed == kEach);

  // One stopped halfway through: what it had unanswered goes to the others, and the rest too.
  REQUIRE(publish_windowed(producer, "spread", "routed", kEach, [&] { nsqds[1]->stop(); }));
  bool out = false;
  for (const auto& node : producer.metrics().publish_nodes)
    if (node.address == nsqds[1]->tcp_address()) out = node.state != "ready";
  CHECK(out);
  nsqds[1]->resume();  // what it kept is read too
  Collector got;
  auto consumer = connect("nsq://" + hosts + "?max_in_flight=500&" + kFast);
  SubscribeOptions options;
  options.group = "all";
  auto sub =
      consumer.subscribe("spread", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  CHECK(got.wait_for_distinct(2 * kEach));
  // And it is back in the rotation once it answers again.
  CHECK(nsqds[0]->wait_until([&] {
    producer.publish("spread", "probe", nullptr);
    for (const auto& node : producer.metrics().publish_nodes)
      if (node.address == nsqds[1]->tcp_address()) return node.state == "ready";
    return false;
  }));
}

TEST_CASE("nsq: least_pending and failover pick their nsqd as they say",
          "[nsq][publish_strategy]") {
  auto a = Nsqd::start();
  auto b = Nsqd::start();
  const std::string hosts = a->tcp_address() + "," + b->tcp_address();
  {
    auto failover = connect("nsq://" + hosts + "?publish_strategy=failover&" + kFast);
    REQUIRE(publish_windowed(failover, "picked", "f", 1000));
    CHECK(a->topic_message_count("picked") == 1000);  // the first up takes everything
    CHECK(b->topic_message_count("picked") == 0);
  }
  // The default (least_pending) spreads: both take a share (not an even one: the one that
  // answers sooner takes more). The first publish dials both; the share is measured once both
  // are up, as one still connecting takes nothing.
  auto spread = connect("nsq://" + hosts + "?" + kFast);
  REQUIRE(spread.publish_sync("spread-warm", "dial") == std::error_code{});
  REQUIRE(eventually([&] {
    const auto nodes = spread.metrics().publish_nodes;
    return nodes.size() == 2 && nodes[0].state == "ready" && nodes[1].state == "ready";
  }));
  REQUIRE(publish_windowed(spread, "spread-default", "d", 10000));
  CHECK(a->topic_message_count("spread-default") >= 1000);
  CHECK(b->topic_message_count("spread-default") >= 1000);
  // A batch stays on one nsqd.
  std::vector<std::string> batch(50, "batched");
  REQUIRE(spread.publish_sync("spread-batch", "warm") == std::error_code{});
  std::promise<Status> done;
  spread.publish_batch("spread-batch", batch, [&](const Status& s) { done.set_value(s); });
  REQUIRE(done.get_future().get() == std::error_code{});
  const auto on_a = a->topic_message_count("spread-batch"),
             on_b = b->topic_message_count("spread-batch");
  CHECK(((on_a == 51 && on_b == 0) || (on_a == 1 && on_b == 50) || (on_a == 50 && on_b == 1) ||
         (on_a == 0 && on_b == 51)));
}

TEST_CASE(
    "nsq: request/reply over topics uses one ephemeral reply topic per client, gone with "
    "it, and a serve channel its servers share",
    "[nsq][request]") {
  auto nsqd = Nsqd::start();
  const std::string url = "nsq://" + nsqd->tcp_address() + "?" + kFast + "&envelope=cloudevents";
  auto server = connect(url);
  auto requester = connect(url);
  auto serving =
      server.serve("rpc-topic", [](Message& m) { return "re:" + std::string(m.payload()); });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  for (int i = 0; i < 3; ++i) {
    auto reply =
        requester.request_sync("rpc-topic", "q" + std::to_string(i), std::chrono::seconds(10));
    REQUIRE(reply.ec == std::error_code{});
    CHECK(reply.payload == "re:q" + std::to_string(i));
    CHECK(reply.headers.contains("polybuscorrelation"));
  }
  auto reply_topics = [&] {
    std::vector<std::string> found;
    for (const auto& topic : nsqd->topics())
      if (topic.rfind("polybus.reply.", 0) == 0) found.push_back(topic);
    return found;
  };
  const auto topics = reply_topics();
  REQUIRE(topics.size() == 1);  // one per client, not one per request
  CHECK(topics.front().size() > std::string("#ephemeral").size());
  CHECK(topics.front().compare(topics.front().size() - 10, 10, "#ephemeral") == 0);
  CHECK(nsqd->channels("rpc-topic") == std::vector<std::string>{"polybus.serve"});
  // The server counts its replies under one name, whatever topic each requester has.
  CHECK(eventually([&] {
    for (const auto& t : server.metrics().topics)
      if (t.topic == "_replies") return t.confirmed == 3;
    return false;
  }));
  for (const auto& t : server.metrics().topics) CHECK(t.topic.rfind("polybus.reply.", 0) != 0);
  REQUIRE(requester.close_sync(std::chrono::seconds(5)) == std::error_code{});
  // nsqd deletes the ephemeral channel with its last client, then the ephemeral topic.
  CHECK(nsqd->wait_until([&] { return reply_topics().empty(); }));
  CHECK(server.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

TEST_CASE(
    "nsq: a message on a served topic without a reply route is reported and acknowledged, "
    "never handled",
    "[nsq][request]") {
  auto nsqd = Nsqd::start();
  const std::string url = "nsq://" + nsqd->tcp_address() + "?" + kFast + "&envelope=cloudevents";
  std::mutex mutex;
  std::vector<Status> errors;
  ConnectOptions options;
  options.on_error = [&](std::error_code ec, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.emplace_back(ec, text);
  };
  auto server = connect(url, options);
  std::atomic<int> handled{0};
  auto serving = server.serve("rpc-bare", [&](Message&) {
    ++handled;
    return std::string("never");
  });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});
  auto publisher = connect(url);
  REQUIRE(publisher.publish_sync("rpc-bare", "no route") == std::error_code{});
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& e : errors)
      if (e == errc::invalid_argument && e.cause().find("polybusreplyto") != std::string::npos)
        return true;
    return false;
  }));
  CHECK(nsqd->wait_until([&] {
    return nsqd->in_flight("rpc-bare", "polybus.serve") == 0 &&
           nsqd->channel_depth("rpc-bare", "polybus.serve") == 0;
  }));
  CHECK(handled.load() == 0);
  CHECK(server.close_sync(std::chrono::seconds(5)) == std::error_code{});
  CHECK(publisher.close_sync(std::chrono::seconds(5)) == std::error_code{});
}

TEST_CASE(
    "nsq: the in-process nsqd's journal shows a FIN for every delivery and RDY never "
    "above max_in_flight",
    "[nsq][journal]") {
  nsq::testing::NsqdOptions options;
  options.journal_capacity = 100000;
  auto nsqd = Nsqd::start(options);
  constexpr int kMessages = 300;
  auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  REQUIRE(publish_windowed(producer, "journaled", "m", kMessages));
  auto consumer = connect("nsq://" + nsqd->tcp_address() + "?max_in_flight=7&" + kFast);
  Collector got;
  SubscribeOptions subscribe;
  subscribe.group = "c";
  auto sub = consumer.subscribe("journaled", subscribe,
                                [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(got.wait_for_distinct(kMessages));

  using polybus::testing::JournalEntry;
  polybus::testing::Journal& journal = nsqd->journal();
  const auto published = journal.entries([](const JournalEntry& e) {
    return e.received && (e.kind == "PUB" || e.kind == "MPUB") && e.topic == "journaled";
  });
  std::int64_t publishes = 0;
  for (const JournalEntry& e : published) publishes += e.count;
  CHECK(publishes == kMessages);
  const auto deliveries =
      journal.entries([](const JournalEntry& e) { return !e.received && e.kind == "message"; });
  REQUIRE(deliveries.size() >= static_cast<std::size_t>(kMessages));
  for (const JournalEntry& delivery : deliveries) {
    CHECK(delivery.topic == "journaled");
    CHECK(delivery.channel == "c");
    const auto fin = journal.wait_for(
        [&](const JournalEntry& e) {
          return e.received && e.kind == "FIN" && e.id == delivery.id &&
                 e.connection == delivery.connection;
        },
        kWaitBound);
    REQUIRE(fin);
    CHECK(fin->seq > delivery.seq);
  }
  const auto rdys =
      journal.entries([](const JournalEntry& e) { return e.received && e.kind == "RDY"; });
  REQUIRE_FALSE(rdys.empty());
  for (const JournalEntry& rdy : rdys) CHECK(rdy.count <= 7);
  CHECK(journal.dropped() == 0);
}

TEST_CASE(
    "nsq: on a manual clock nsqd's 60 s msg_timeout, a REQ delay and a deferred publish come due "
    "as the test advances it, before advance returns",
    "[nsq][clock]") {
  auto clock = std::make_shared<polybus::ManualClock>();
  nsq::testing::NsqdOptions options;
  options.clock = clock;  // msg_timeout stays nsqd's 60 s
  auto nsqd = Nsqd::start(options);
  // No backoff after the nack: RDY stays at max_in_flight while messages are held.
  auto client = connect("nsq://" + nsqd->tcp_address() + "?max_backoff_duration=0&" + kFast);
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<Message> held;  // kept unanswered: only nsqd's timeout can send it again
  std::vector<std::string> seen;
  SubscribeOptions group;
  group.group = "timed";
  group.max_in_flight = 8;  // a redelivery is one more message within RDY, not over it
  auto sub = client.subscribe("timed", group, [&](Message& m) {
    std::lock_guard<std::mutex> lock(mutex);
    if (m.payload() == "requeued" && m.attempts() == 1) {
      m.nack(std::chrono::seconds(30));  // REQ with a 30 s delay
    } else if (m.payload() == "held" && m.attempts() == 1) {
      m.take_manual_control();
      held.push_back(m);
    }  // the rest are acked on return
    seen.push_back(std::string(m.payload()) + "#" + std::to_string(m.attempts()));
    arrived.notify_all();
  });
  const auto seen_count = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return arrived.wait_for(lock, kWaitBound, [&] { return seen.size() >= n; });
  };
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(client.publish_sync("timed", "held") == std::error_code{});
  REQUIRE(client.publish_sync("timed", "requeued") == std::error_code{});
  PublishOptions in_ten_minutes;
  in_ten_minutes.defer = std::chrono::minutes(10);
  REQUIRE(client.publish_sync("timed", "deferred", in_ten_minutes) == std::error_code{});
  REQUIRE(seen_count(2));
  REQUIRE(nsqd->wait_until([&] { return nsqd->deferred("timed", "timed") == 2; }));

  clock->advance(std::chrono::seconds(29));
  CHECK(nsqd->deferred("timed", "timed") == 2);
  CHECK(nsqd->timeout_count("timed", "timed") == 0);
  clock->advance(std::chrono::seconds(1));  // the REQ's 30 s
  CHECK(nsqd->deferred("timed", "timed") == 1);
  REQUIRE(seen_count(3));
  // Its FIN in before time moves on, or it too would time out.
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("timed", "timed") == 1; }));
  clock->advance(std::chrono::seconds(29));
  CHECK(nsqd->timeout_count("timed", "timed") == 0);
  clock->advance(std::chrono::seconds(1));  // "held"'s 60 s: timed out before advance returned
  CHECK(nsqd->timeout_count("timed", "timed") == 1);
  REQUIRE(seen_count(4));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("timed", "timed") == 0; }));
  clock->advance(std::chrono::minutes(9));  // the deferred publish's 10 min
  CHECK(nsqd->deferred("timed", "timed") == 0);
  REQUIRE(seen_count(5));
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(seen ==
        std::vector<std::string>{"held#1", "requeued#1", "requeued#2", "held#2", "deferred#1"});
}

TEST_CASE(
    "nsq: on a manual clock heartbeats stay on the real clock, so an hour advanced in one "
    "step drops no connection",
    "[nsq][clock]") {
  auto clock = std::make_shared<polybus::ManualClock>();
  nsq::testing::NsqdOptions options;
  options.clock = clock;
  auto nsqd = Nsqd::start(options);
  DropWatch watch;
  ConnectOptions connect_options = watch.options();
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast, connect_options);
  Latch got;
  SubscribeOptions group;
  group.group = "alive";
  auto sub = client.subscribe("alive", group, [&](Message&) { got.count_down(); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  clock->advance(std::chrono::hours(1));
  REQUIRE(client.publish_sync("alive", "still here") == std::error_code{});
  REQUIRE(got.wait_for(1));
  CHECK(watch.disconnects == 0);
}

TEST_CASE("nsq: a hold fault keeps what a connection is sent until the test removes the rule",
          "[nsq][faults]") {
  nsq::testing::NsqdOptions options;
  options.journal_capacity = 1000;
  auto nsqd = Nsqd::start(options);
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  Latch got;
  SubscribeOptions group;
  group.group = "held";
  auto sub = client.subscribe("held", group, [&](Message&) { got.count_down(); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  const auto rule = nsqd->faults().add(polybus::testing::parse_fault_rule("unit=message,hold"));
  REQUIRE(client.publish_sync("held", "kept") == std::error_code{});
  // Sent as far as nsqd is concerned, and held on the connection.
  REQUIRE(nsqd->journal().wait_for(
      [](const polybus::testing::JournalEntry& e) { return e.kind == "message"; }, kWaitBound));
  CHECK(nsqd->in_flight("held", "held") == 1);
  CHECK(got.count() == 0);
  CHECK(nsqd->faults().remove(rule));
  REQUIRE(got.wait_for(1));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("held", "held") == 0; }));
}
