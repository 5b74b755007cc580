// SPDX-License-Identifier: Apache-2.0
// The MemoDB adapter against the in-process broker: many workers and requesters on one socket,
// 16 concurrent workers, the request bound, worker and queue timeouts, heartbeats, broker
// restarts, pause/resume/scaling, close mid-job, the broker's wire format seen from raw NNG
// sockets, and hostile bytes in both directions. No sleeps: every wait is on a condition, with
// its timeout only as the bound after which the test fails.
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <unistd.h>

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <initializer_list>
#include <random>
#include <set>
#include <thread>

#include "polybus/memodb.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb/sp.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/polybus.hpp"
#include "polybus/testing.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;
using memodb::testing::Broker;
using memodb::testing::BrokerOptions;
using memodb::testing::BrokerStats;

namespace {

// The real broker's timings, made short; idle heartbeats slower than most tests last.
BrokerOptions fast(std::string url = {}) {
  BrokerOptions o;
  o.url = std::move(url);
  o.heartbeat_interval = 1s;
  o.heartbeat_timeout = 1s;
  o.queue_timeout = 5s;
  return o;
}

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + "ms";
}

// The client's options carry the broker's timings, so its resend times fit them.
std::string url_of(const Broker& broker, const BrokerOptions& o, const std::string& extra = {}) {
  memodb::register_scheme();
  return "memodb+" + broker.url() + "?heartbeat_interval=" + ms(o.heartbeat_interval) +
         "&heartbeat_timeout=" + ms(o.heartbeat_timeout) + "&queue_timeout=" + ms(o.queue_timeout) +
         "&reconnect_initial=10ms&reconnect_max=100ms" + (extra.empty() ? "" : "&" + extra);
}

std::string temp_ipc() {
  static std::atomic<int> counter{0};
  return "ipc:///tmp/polybus-memodb-test-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter) + ".ipc";
}

bool wait(const Broker& broker, const std::function<bool(const BrokerStats&)>& condition) {
  return broker.wait_until(condition, kWaitBound);
}

std::uint64_t workers_for(const BrokerStats& s, const std::string& service) {
  auto it = s.workers_by_service.find(service);
  return it == s.workers_by_service.end() ? 0 : it->second;
}

// Replies collected from request() completions (on the client's strand).
class Replies {
 public:
  void add(int index, Reply reply) {
    std::lock_guard<std::mutex> lock(mutex_);
    replies_[index].push_back(std::move(reply));
    times_[index] = std::chrono::steady_clock::now();
    ++count_;
    cv_.notify_all();
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] { return count_ >= n; });
  }
  std::map<int, std::vector<Reply>> all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return replies_;
  }
  std::map<int, std::chrono::steady_clock::time_point> times() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return times_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int, std::vector<Reply>> replies_;
  std::map<int, std::chrono::steady_clock::time_point> times_;
  std::size_t count_ = 0;
};

// Errors reported through ConnectOptions::on_error.
class Errors {
 public:
  void add(std::error_code ec) {
    std::lock_guard<std::mutex> lock(mutex_);
    codes_.push_back(ec);
    cv_.notify_all();
  }
  bool wait_for(const std::error_category& category, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] {
      for (auto& ec : codes_)
        if (&ec.category() == &category) return true;
      return false;
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::error_code> codes_;
};

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

const std::string kVersionHex = "666d656d6f3031";  // "memo01"

// A bare NNG socket for speaking memo01 byte by byte. Blocking calls, bounded by kWaitBound.
class RawSocket {
 public:
  enum class Kind { req, rep };
  explicit RawSocket(Kind kind) {
    int rv = kind == Kind::req ? nng_req0_open(&socket_) : nng_rep0_open(&socket_);
    if (rv != 0) throw std::runtime_error(nng_strerror(rv));
    nng_socket_set_ms(socket_, NNG_OPT_RECVTIMEO,
                      static_cast<nng_duration>(kWaitBound.count() * 1000));
    nng_socket_set_ms(socket_, NNG_OPT_SENDTIMEO,
                      static_cast<nng_duration>(kWaitBound.count() * 1000));
    nng_socket_set_size(socket_, NNG_OPT_RECVMAXSZ, 0);
  }
  ~RawSocket() { nng_close(socket_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  int dial(const std::string& url) { return nng_dial(socket_, url.c_str(), nullptr, 0); }
  // Listens on a free loopback port; returns the address.
  std::string listen() {
    nng_listener listener;
    if (nng_listen(socket_, "tcp://127.0.0.1:0", &listener, 0) != 0) return {};
    int port = 0;
    nng_listener_get_int(listener, NNG_OPT_TCP_BOUND_PORT, &port);
    return "tcp://127.0.0.1:" + std::to_string(port);
  }
  int send(std::string_view bytes) {
    return nng_send(socket_, const_cast<char*>(bytes.data()), bytes.size(), 0);
  }
  // Empty optional on timeout or error.
  std::optional<std::string> recv() {
    nng_msg* msg = nullptr;
    if (nng_recvmsg(socket_, &msg, 0) != 0) return std::nullopt;
    std::string out(static_cast<const char*>(nng_msg_body(msg)), nng_msg_len(msg));
    nng_msg_free(msg);
    return out;
  }

 private:
  nng_socket socket_ = NNG_SOCKET_INITIALIZER;
};

std::string header(std::error_code ec, const std::string& bytes) {
  if (ec) throw std::runtime_error(ec.message());
  return bytes;
}

std::string ready_bytes(std::vector<std::string> services) {
  std::string out;
  return header(memodb::append_ready(out, std::move(services)), out);
}
std::string job_bytes(const std::string& service, std::uint64_t timeout_ms,
                      const std::string& payload) {
  std::string out;
  return header(memodb::append_job(out, {}, service, timeout_ms), out) + payload;
}

}  // namespace

TEST_CASE("memodb: request/reply over tcp and ipc gives every payload back byte for byte",
          "[memodb]") {
  std::string big(1 << 20, '\0');
  std::mt19937 random(7);
  for (auto& c : big) c = static_cast<char>(random());
  const std::vector<std::string> payloads = {"", "x", std::string("\0\xff\x84\x9f", 4), big};
  for (const std::string& address : {std::string(), temp_ipc()}) {
    DYNAMIC_SECTION((address.empty() ? "tcp" : "ipc")) {
      auto options = fast(address);
      auto broker = Broker::launch(options);
      auto server = connect(url_of(*broker, options));
      auto client = connect(url_of(*broker, options));
      CHECK(client.scheme() == (address.empty() ? "memodb+tcp" : "memodb+ipc"));
      auto sub = server.serve("echo", [](Message& m) {
        return "echo:" + std::string(m.topic()) + ":" + std::string(m.payload());
      });
      REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
      for (const auto& p : payloads) {
        auto reply = client.request_sync("echo", p, 10s);
        REQUIRE(reply.ec == std::error_code{});
        CHECK(reply.payload == "echo:echo:" + p);
      }
      CHECK(broker->stats().results == payloads.size());
      CHECK(client.stats().replies == payloads.size());
      CHECK(client.stats().bytes_out >= big.size());
    }
  }
}

TEST_CASE(
    "memodb: a serve's concurrency sets its number of workers when the workers option is unset",
    "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options));
  SubscribeOptions so;
  so.concurrency = 5;
  auto sub = server.serve("sized", so, [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "sized") == 5; }));
  auto other = server.serve("default", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(other.wait_ready(kWaitBound) == std::error_code{});
  // No concurrency given: handler_concurrency (1 by default).
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "default") == 1; }));
  CHECK(workers_for(broker->stats(), "sized") == 5);
}

TEST_CASE("memodb: 16 concurrent workers on one socket answer 2,000 requests, 16 at a time",
          "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=16"));
  auto client = connect(url_of(*broker, options, "max_requests=64"));
  std::atomic<int> running{0}, peak{0};
  Gate all_running;  // the first 16 jobs wait until 16 handlers run at once
  SubscribeOptions so;
  so.concurrency = 16;
  auto sub = server.serve("work", so, [&](Message& m) {
    const int now = ++running;
    raise_to(peak, now);
    if (now == 16) all_running.open();
    all_running.wait();
    --running;
    return "done:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker,
               [](const BrokerStats& s) { return workers_for(s, "work") == 16 && s.idle == 16; }));
  constexpr int kCount = 2000;
  Replies replies;
  for (int i = 0; i < kCount; ++i)
    client.request("work", std::to_string(i), 60s,
                   [&, i](Reply r) { replies.add(i, std::move(r)); });
  REQUIRE(replies.wait_for(kCount, 120s));
  auto all = replies.all();
  REQUIRE(all.size() == static_cast<std::size_t>(kCount));
  for (auto& [i, list] : all) {
    REQUIRE(list.size() == 1);  // exactly once
    CHECK(list[0].ec == std::error_code{});
    CHECK(list[0].payload == "done:" + std::to_string(i));
  }
  CHECK(peak.load() == 16);
  auto s = broker->stats();
  CHECK(s.connections == 2);  // 16 workers and 64 requests in flight: one socket per client
  CHECK(s.dispatched == static_cast<std::uint64_t>(kCount));
  CHECK(s.registrations == 16);  // no phantom registrations, no re-registrations
}

TEST_CASE("memodb: many workers and requesters are multiplexed on one socket per client",
          "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  // One client serves two services with 8 workers each and makes requests too.
  auto a = connect(url_of(*broker, options, "workers=8&handler_concurrency=8"));
  auto b = connect(url_of(*broker, options));
  auto alpha = a.serve("alpha", [](Message& m) { return "alpha:" + std::string(m.payload()); });
  auto beta = a.serve("beta", [](Message& m) { return "beta:" + std::string(m.payload()); });
  REQUIRE(alpha.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(beta.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) {
    return workers_for(s, "alpha") == 8 && workers_for(s, "beta") == 8;
  }));
  constexpr int kPer = 300;
  Replies replies;
  int index = 0;
  std::map<int, std::string> expected;
  for (Client* client : {&a, &b}) {
    for (const std::string service : {"alpha", "beta"}) {
      for (int i = 0; i < kPer; ++i) {
        const std::string payload = (client == &a ? "a" : "b") + std::to_string(i);
        expected[index] = service + ":" + payload;
        client->request(service, payload, 60s,
                        [&, index](Reply r) { replies.add(index, std::move(r)); });
        ++index;
      }
    }
  }
  REQUIRE(replies.wait_for(expected.size(), 120s));
  auto all = replies.all();
  for (auto& [i, list] : all) {
    REQUIRE(list.size() == 1);
    CHECK(list[0].ec == std::error_code{});
    CHECK(list[0].payload == expected[i]);
  }
  auto s = broker->stats();
  CHECK(s.connections == 2);
  CHECK(s.results == expected.size());
  CHECK(s.registrations == 16);
}

TEST_CASE(
    "memodb: max_requests bounds the requests in flight, the others wait, up to their deadline",
    "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options, "max_requests=2"));
  Gate release;
  auto sub = server.serve("slow", [&](Message& m) {
    release.wait();
    return "done:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  Replies replies;
  for (int i = 0; i < 2; ++i)
    client.request("slow", std::to_string(i), 30s,
                   [&, i](Reply r) { replies.add(i, std::move(r)); });
  // Sent: one with the worker, one queued at the broker.
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.dispatched == 1 && s.queued == 1; }));
  for (int i = 2; i < 5; ++i)
    client.request("slow", std::to_string(i), 300ms,
                   [&, i](Reply r) { replies.add(i, std::move(r)); });
  REQUIRE(replies.wait_for(3));
  auto all = replies.all();
  for (int i = 2; i < 5; ++i) {
    REQUIRE(all[i].size() == 1);
    CHECK(all[i][0].ec == errc::timeout);
  }
  CHECK(broker->stats().jobs == 2);  // the three never left the client
  // Requests waiting for a slot are the client's waiting_requests gauge; those whose deadline
  // passed are not counted any more.
  CHECK(client.metrics().waiting_requests <= 3);
  for (int i = 5; i < 8; ++i)
    client.request("slow", std::to_string(i), 30s,
                   [&, i](Reply r) { replies.add(i, std::move(r)); });
  REQUIRE(eventually([&] { return client.metrics().waiting_requests == 3; }));
  release.open();
  REQUIRE(replies.wait_for(8));
  all = replies.all();
  for (int i : {0, 1, 5, 6, 7}) {
    REQUIRE(all[i].size() == 1);
    CHECK(all[i][0].ec == std::error_code{});
    CHECK(all[i][0].payload == "done:" + std::to_string(i));
  }
  CHECK(client.metrics().waiting_requests == 0);
}

TEST_CASE("memodb: a worker that overruns its job's timeout is forgotten, then registers again",
          "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options));
  Gate release;
  std::atomic<int> calls{0};
  auto sub = server.serve("slow", [&](Message& m) {
    if (++calls == 1) release.wait();
    return "answer:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  // The JOB's timeout is what is left of the request's deadline: 300 ms.
  auto late = client.request_sync("slow", "late", 300ms);
  CHECK(late.ec == errc::timeout);
  REQUIRE(
      wait(*broker, [](const BrokerStats& s) { return s.workers_expired == 1 && s.workers == 0; }));
  release.open();
  // Its RESULT names an ID the broker forgot: DISCONNECT, then READY again.
  REQUIRE(wait(*broker, [](const BrokerStats& s) {
    return s.disconnects == 1 && s.registrations == 2 && s.idle == 1;
  }));
  auto next = client.request_sync("slow", "next", 10s);
  REQUIRE(next.ec == std::error_code{});
  CHECK(next.payload == "answer:next");
  CHECK(broker->stats().results == 1);  // the late RESULT was never handed on
}

TEST_CASE(
    "memodb: a job no worker takes is dropped after queue_timeout, and the request is "
    "resent only once the broker surely dropped it",
    "[memodb]") {
  auto options = fast();
  options.queue_timeout = 200ms;
  auto broker = Broker::launch(options);
  // job_timeout: the time the broker gives the job once taken. Without it a job may run as long
  // as the request's deadline, and NNG would never resend within it.
  auto client = connect(url_of(*broker, options, "job_timeout=300ms"));
  auto start = std::chrono::steady_clock::now();
  Latch done;
  Reply reply;
  client.request("nobody", "x", 4s, [&](Reply r) {
    reply = std::move(r);
    done.count_down();
  });
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.queue_expired >= 1; }));
  CHECK(broker->stats().jobs == 1);
  // NNG resends it, and only once the broker had dropped the earlier copy: a job is never
  // queued or run twice at once (read from the broker's counts as the resend arrives).
  std::uint64_t dropped_when_resent = 0;
  REQUIRE(wait(*broker, [&](const BrokerStats& s) {
    dropped_when_resent = s.queue_expired;
    return s.jobs >= 2;
  }));
  CHECK(dropped_when_resent >= 1);
  REQUIRE(done.wait_for(1));
  CHECK(reply.ec == errc::timeout);
  CHECK(std::chrono::steady_clock::now() - start >= 4s);
  auto s = broker->stats();
  CHECK(s.queue_expired == s.jobs);
  CHECK(s.dropped == s.jobs);
}

TEST_CASE("memodb: idle workers answer every HEARTBEAT and stay registered", "[memodb]") {
  auto options = fast();
  options.heartbeat_interval = 50ms;
  options.heartbeat_timeout = 2s;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=2"));
  auto sub = server.serve("idle", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.heartbeats >= 20; }));
  auto s = broker->stats();
  CHECK(s.workers_expired == 0);
  CHECK(s.registrations == 2);
  CHECK(s.workers == 2);
  auto client = connect(url_of(*broker, options));
  CHECK(client.request_sync("idle", "still here", 10s).payload == "still here");
}

TEST_CASE(
    "memodb: after a broker restart workers register again and pending requests complete "
    "or fail by their deadline",
    "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  std::atomic<int> client_disconnects{0}, client_connects{0};
  ConnectOptions watch;
  watch.on_state = [&](const StateEvent& e) {
    if (e.state == ConnectionState::disconnected) ++client_disconnects;
    if (e.state == ConnectionState::connected) ++client_connects;
  };
  auto server = connect(url_of(*broker, options, "workers=4&handler_concurrency=4"));
  // All 34 requests at the broker at once (the default sends 8).
  auto client = connect(url_of(*broker, options, "max_requests=64"), watch);
  Gate release;
  Latch entered;
  std::mutex calls_mutex;
  std::map<std::string, int> calls;
  auto sub = server.serve("echo", [&](Message& m) {
    {
      std::lock_guard<std::mutex> lock(calls_mutex);
      ++calls[std::string(m.payload())];
    }
    entered.count_down();
    release.wait();  // the first four jobs are held across the restart
    return "echo:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker,
               [](const BrokerStats& s) { return workers_for(s, "echo") == 4 && s.idle == 4; }));

  Replies replies;
  std::map<int, std::chrono::steady_clock::time_point> deadlines;
  auto send = [&](int i, std::chrono::milliseconds timeout) {
    deadlines[i] = std::chrono::steady_clock::now() + timeout;
    client.request("echo", std::to_string(i), timeout,
                   [&, i](Reply r) { replies.add(i, std::move(r)); });
  };
  // Four in the workers' handlers, twenty queued at the broker, ten that expire while queued.
  for (int i = 0; i < 4; ++i) send(i, 30s);
  REQUIRE(entered.wait_for(4));
  for (int i = 4; i < 24; ++i) send(i, 30s);
  for (int i = 24; i < 34; ++i) send(i, 300ms);
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.jobs == 34 && s.connections == 2; }));
  REQUIRE(replies.wait_for(10));  // the short ones, by their deadline

  // Everything is in the broker's hands (nothing being sent) when it dies and comes back.
  broker->stop();
  broker->start();
  // The held RESULTs reach the new broker, which answers DISCONNECT; or, written before the
  // client saw its connection go, they are given up (a RESULT is never resent) and the worker
  // registers afresh.
  release.open();

  REQUIRE(replies.wait_for(34, 60s));
  auto all = replies.all();
  auto times = replies.times();
  for (auto& [i, list] : all) {
    INFO("request " << i);
    REQUIRE(list.size() == 1);             // exactly once
    CHECK(times[i] <= deadlines[i] + 1s);  // by its deadline (the margin: a loaded machine)
    if (i >= 24) {
      CHECK(list[0].ec == errc::timeout);
    } else {
      // NNG resent it to the new broker as soon as it reconnected, and a worker that
      // registered again ran it.
      CHECK(list[0].ec == std::error_code{});
      CHECK(list[0].payload == "echo:" + std::to_string(i));
    }
  }
  {
    // The four held jobs ran twice: their first RESULTs went to a broker that forgot them.
    std::lock_guard<std::mutex> lock(calls_mutex);
    for (int i = 0; i < 4; ++i) CHECK(calls[std::to_string(i)] == 2);
    for (int i = 4; i < 24; ++i) CHECK(calls[std::to_string(i)] == 1);
    // A request that timed out had reached the broker: like a publish that timed out, it may
    // still take effect (NNG resends what is pending when the connection drops, and the
    // request's own NNG timeout can trail its deadline by a moment), but never twice.
    for (int i = 24; i < 34; ++i) CHECK(calls[std::to_string(i)] <= 1);
  }
  REQUIRE(wait(*broker,
               [](const BrokerStats& s) { return s.starts == 2 && workers_for(s, "echo") == 4; }));
  CHECK(broker->stats().disconnects <= 4);
  auto fresh = client.request_sync("echo", "fresh", 10s);
  REQUIRE(fresh.ec == std::error_code{});
  CHECK(fresh.payload == "echo:fresh");
  CHECK(client_disconnects.load() >= 1);
  CHECK(client_connects.load() >= 2);
  CHECK(client.stats().reconnects >= 1);
}

TEST_CASE("memodb: a broker down when requests start: they wait for it, up to their deadline",
          "[memodb]") {
  auto options = fast();
  options.heartbeat_interval = 60s;  // nothing on the wire when it stops
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=2"));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 2 && s.connections == 2; }));
  broker->stop();
  // Not connected at its deadline: it says so and why (timeout only if the drop is not seen yet).
  const Status late = client.request_sync("echo", "x", 300ms).status();
  INFO(late.message());
  CHECK((late == errc::disconnected || late == errc::connect_failed || late == errc::timeout));
  CHECK_FALSE(late.cause().empty());
  Replies replies;
  client.request("echo", "after", 20s, [&](Reply r) { replies.add(0, std::move(r)); });
  broker->start();
  REQUIRE(replies.wait_for(1));
  auto reply = replies.all()[0][0];
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "after");
}

namespace {
// A requester that speaks SP over a plain socket, so that it can leave the broker's answers unread.
// Every socket operation runs on its own io thread: an asio socket is not for two threads at once.
class FloodingRequester {
 public:
  explicit FloodingRequester(const Broker& broker) : socket_(io_) {
    const std::string url = broker.url();  // tcp://127.0.0.1:port
    const auto port = static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)));
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
    asio::write(socket_, asio::buffer(memodb::sp::connection_header(memodb::sp::Protocol::req0)));
    char header[memodb::sp::kHeaderSize];
    asio::read(socket_, asio::buffer(header));
    runner_ = std::thread([this] { io_.run(); });
  }
  // `count` JOBs for `service`, each with `payload`, as one write: the broker may stop reading
  // them.
  void flood(const std::string& service, std::uint32_t count, const std::string& payload) {
    std::string bytes;
    for (std::uint32_t i = 0; i < count; ++i) {
      std::string body;
      REQUIRE(memodb::append_job(body, {}, service, 60'000) == std::error_code{});
      body += payload;
      const std::string id = memodb::sp::encode_request_id(memodb::sp::request_id(i));
      bytes += memodb::sp::frame_prefix(memodb::sp::Carrier::tcp, id.size() + body.size());
      bytes += id + body;
    }
    asio::post(io_, [this, bytes = std::move(bytes)]() mutable {
      flooded_ = std::move(bytes);
      asio::async_write(socket_, asio::buffer(flooded_), [](std::error_code, std::size_t) {});
    });
  }
  // Reads and discards `bytes` of answers; false if they did not all come within the wait bound.
  bool read(std::size_t bytes) {
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    asio::post(io_, [this, bytes, done] {
      sink_.resize(bytes);
      asio::async_read(socket_, asio::buffer(sink_),
                       [done](std::error_code ec, std::size_t) { done->set_value(!ec); });
    });
    return result.wait_for(kWaitBound) == std::future_status::ready && result.get();
  }
  ~FloodingRequester() {
    asio::post(io_, [this] {
      std::error_code ignored;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);  // cancels what is pending
    });
    work_.reset();
    runner_.join();
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  asio::ip::tcp::socket socket_;
  std::string flooded_;     // io thread
  std::vector<char> sink_;  // io thread
  std::thread runner_;
};
}  // namespace

TEST_CASE(
    "memodb: the in-process broker reads no further from a client that holds max_held_requests",
    "[memodb][budget]") {
  auto options = fast();
  // Jobs nobody takes expire, and free the budget in turn; long enough that the first 100 are
  // all read before any expires, however loaded the machine.
  options.queue_timeout = 300ms;
  options.max_held_requests = 100;
  auto broker = Broker::launch(options);
  FloodingRequester requester(*broker);
  constexpr std::uint32_t kJobs = 400;
  requester.flood("nobody", kJobs, "x");
  REQUIRE(wait(*broker, [&](const BrokerStats& s) {
    return s.received == kJobs && s.queue_expired == kJobs;
  }));
  const auto s = broker->stats();
  CHECK(s.read_stalls >= 1);
  CHECK(s.held_requests_peak == options.max_held_requests);
}

TEST_CASE(
    "memodb: the in-process broker's answers to a client that does not read stay within "
    "max_held_bytes",
    "[memodb][budget]") {
  auto options = fast();
  options.max_held_bytes = std::size_t{256} << 10;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options));
  auto sub = server.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  FloodingRequester requester(*broker);
  // 16 MiB of answers: more than loopback's socket buffers take.
  constexpr std::uint32_t kJobs = 256;
  const std::string payload(std::size_t{64} << 10, 'p');
  requester.flood("echo", kJobs, payload);
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.read_stalls > 0; }));
  // Now read every answer: the broker goes on where it stopped.
  std::string result;
  REQUIRE(memodb::append_result(result, {}) == std::error_code{});
  const std::size_t answer = memodb::sp::frame_prefix(memodb::sp::Carrier::tcp, 0).size() + 4 +
                             result.size() + payload.size();
  REQUIRE(requester.read(answer * kJobs));
  const auto s = broker->stats();
  CHECK(s.results == kJobs);
  // One JOB or answer past the bound at most: the check comes before each request is read, and
  // an answer is queued before its request is let go.
  const std::size_t message = answer + 64;
  CHECK(s.held_bytes_peak <= options.max_held_bytes + 2 * message);
}

TEST_CASE("memodb: the in-process broker survives hostile CBOR and keeps serving", "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  std::string deep = "83" + kVersionHex + "04";
  std::vector<std::string> hostile = {
      "",
      "\xff",
      std::string("\x84\x66memo01\x01", 9),           // READY cut short
      std::string("\x9f\x66memo01\x04\x40\xff", 11),  // indefinite array
      std::string("\x83\x66memo02\x04\x40", 10),      // wrong version
      std::string("\x83\x66memo01\x09\x40", 10),      // unknown type
      std::string("\x83\x66memo01\x04\x7b\xff\xff\xff\xff\xff\xff\xff\xff", 17),
      std::string("\x85\x66memo01\x02\x40\x60\x01", 12),  // empty service
      std::string(1 << 20, '\x81'),                       // deep nesting
      "\x1c",
  };
  hostile.push_back(
      std::string("\x84\x66memo01\x01\x40\x82\x68"
                  "alive.tv"
                  "\x64"
                  "echo",
                  24));  // unsorted
  std::mt19937 random(99);
  for (int i = 0; i < 20; ++i) {
    std::string junk(1 + random() % 200, '\0');
    for (auto& c : junk) c = static_cast<char>(random());
    junk[0] = '\x83';  // an array head, so most of it is read
    hostile.push_back(junk);
  }
  RawSocket raw(RawSocket::Kind::req);
  REQUIRE(raw.dial(broker->url()) == 0);
  std::uint64_t sent = 0;
  for (const auto& bytes : hostile) {
    INFO("message " << sent << ": " << hex(bytes.substr(0, 32)));
    REQUIRE(raw.send(bytes) == 0);
    ++sent;
    // Each is dropped without a reply (the requester would only time out), and counted.
    REQUIRE(wait(*broker, [&](const BrokerStats& s) { return s.received == sent; }));
  }
  auto s = broker->stats();
  CHECK(s.malformed >= hostile.size() - 20);  // the random ones may happen to decode
  CHECK(s.dropped == hostile.size());
  CHECK(s.workers == 0);

  auto server = connect(url_of(*broker, options));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("echo", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  CHECK(client.request_sync("echo", "alive", 10s).payload == "alive");
}

TEST_CASE(
    "memodb: the broker's wire format: the worker's ID in the JOB, RESULT to the client "
    "without the flag, HEARTBEAT, DISCONNECT for unknown IDs",
    "[memodb]") {
  auto options = fast();
  options.heartbeat_interval = 100ms;
  auto broker = Broker::launch(options);
  RawSocket worker(RawSocket::Kind::req), client(RawSocket::Kind::req);
  REQUIRE(worker.dial(broker->url()) == 0);
  REQUIRE(client.dial(broker->url()) == 0);

  REQUIRE(worker.send(ready_bytes({"echo"})) == 0);
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  REQUIRE(client.send(job_bytes("echo", 5000, "payload")) == 0);
  auto job = worker.recv();
  REQUIRE(job);
  REQUIRE(job->size() == 1 + 7 + 1 + 5 + 5 + 3 + 7);
  const std::string id = job->substr(10, 4);
  CHECK(hex(*job) == "85" + kVersionHex +
                         "02"
                         "44" +
                         hex(id) + "64" + hex("echo") + "191388" + hex("payload"));

  std::string result;
  REQUIRE(memodb::append_result(result, id, true) == std::error_code{});
  REQUIRE(worker.send(result + "result") == 0);
  auto to_client = client.recv();
  REQUIRE(to_client);
  CHECK(hex(*to_client) == "83" + kVersionHex +
                               "03"
                               "40" +
                               hex("result"));
  auto bye = worker.recv();
  REQUIRE(bye);
  CHECK(hex(*bye) == "83" + kVersionHex +
                         "05"
                         "44" +
                         hex(id));
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.workers == 0; }));

  // An ID the broker never gave out: DISCONNECT, echoing it.
  std::string unknown;
  REQUIRE(memodb::append_heartbeat(unknown, "abc") == std::error_code{});
  REQUIRE(worker.send(unknown) == 0);
  auto echo = worker.recv();
  REQUIRE(echo);
  CHECK(hex(*echo) == "83" + kVersionHex +
                          "05"
                          "43" +
                          hex("abc"));

  // Idle: HEARTBEAT after heartbeat_interval; answering keeps the worker.
  REQUIRE(worker.send(ready_bytes({"echo", "alive.tv"})) == 0);
  auto beat = worker.recv();
  REQUIRE(beat);
  REQUIRE(beat->size() == 1 + 7 + 1 + 5);
  const std::string id2 = beat->substr(10, 4);
  CHECK(id2 != id);
  CHECK(hex(*beat) == "83" + kVersionHex +
                          "04"
                          "44" +
                          hex(id2));
  std::string answer;
  REQUIRE(memodb::append_heartbeat(answer, id2) == std::error_code{});
  REQUIRE(worker.send(answer) == 0);
  auto again = worker.recv();  // the next HEARTBEAT: still registered
  REQUIRE(again);
  CHECK(hex(*again) == hex(*beat));
  auto s = broker->stats();
  CHECK(s.workers_expired == 0);
  CHECK(s.registrations == 2);
  CHECK(workers_for(s, "alive.tv") == 1);
}

TEST_CASE(
    "memodb: a broker that sends garbage fails the request with a memodb error, and a "
    "worker registers again",
    "[memodb]") {
  memodb::register_scheme();
  RawSocket fake(RawSocket::Kind::rep);
  const std::string address = fake.listen();
  REQUIRE_FALSE(address.empty());
  Errors errors;
  ConnectOptions on_error;
  on_error.on_error = [&](std::error_code ec, const std::string&) { errors.add(ec); };
  const std::string url = "memodb+" + address + "?reconnect_initial=10ms&reconnect_max=100ms";

  SECTION("a requester") {
    auto client = connect(url);
    Replies replies;
    client.request("echo", "x", 5s, [&](Reply r) { replies.add(0, std::move(r)); });
    auto job = fake.recv();
    REQUIRE(job);
    memodb::Header h;
    std::string_view payload;
    REQUIRE(memodb::decode(*job, h, payload) == std::error_code{});
    CHECK(h.type == memodb::MessageType::job);
    CHECK(h.id.empty());
    CHECK(h.service == "echo");
    CHECK(h.timeout_ms <= 5000);  // what is left of the deadline
    CHECK(h.timeout_ms > 1000);
    CHECK(payload == "x");
    REQUIRE(fake.send(std::string("\x83\x66memo", 6)) == 0);  // cut short
    REQUIRE(replies.wait_for(1));
    auto reply = replies.all()[0][0];
    CHECK(reply.ec == memodb::errc::truncated);
    CHECK(std::string(reply.ec.category().name()) == "memodb");

    client.request("echo", "y", 5s, [&](Reply r) { replies.add(1, std::move(r)); });
    REQUIRE(fake.recv());
    std::string heartbeat;
    REQUIRE(memodb::append_heartbeat(heartbeat, {}) == std::error_code{});
    REQUIRE(fake.send(heartbeat) == 0);  // valid memo01, but not a RESULT
    REQUIRE(replies.wait_for(2));
    CHECK(replies.all()[1][0].ec == errc::protocol_error);
  }

  SECTION("a worker") {
    auto server = connect(url, on_error);
    auto sub = server.serve("echo", [](Message& m) { return std::string(m.payload()); });
    auto ready = fake.recv();
    REQUIRE(ready);
    CHECK(hex(*ready) == hex(ready_bytes({"echo"})));
    REQUIRE(fake.send("\xff") == 0);
    REQUIRE(errors.wait_for(memodb::memodb_category()));
    auto again = fake.recv();  // registers again
    REQUIRE(again);
    CHECK(hex(*again) == hex(ready_bytes({"echo"})));
    // A real JOB then works: the worker answers with its ID.
    std::string job;
    REQUIRE(memodb::append_job(job, "WXYZ", "echo", 1000) == std::error_code{});
    REQUIRE(fake.send(job + "ping") == 0);
    auto result = fake.recv();
    REQUIRE(result);
    std::string expected;
    REQUIRE(memodb::append_result(expected, "WXYZ") == std::error_code{});
    CHECK(hex(*result) == hex(expected + "ping"));
  }
}

TEST_CASE(
    "memodb: closing mid-job: the last RESULT says disconnecting and still reaches the "
    "requester",
    "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options));
  Gate release;
  Latch started, closed;
  auto sub = server.serve("job", [&](Message& m) {
    started.count_down();
    release.wait();
    return "bye:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  Replies replies;
  client.request("job", "1", 20s, [&](Reply r) { replies.add(0, std::move(r)); });
  REQUIRE(started.wait_for(1));
  server.close(20s, [&](std::error_code) { closed.count_down(); });
  CHECK_FALSE(closed.wait_for(1, 100ms));  // bound: close waits for the handler
  release.open();
  REQUIRE(closed.wait_for(1));
  REQUIRE(replies.wait_for(1));
  auto reply = replies.all()[0][0];
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "bye:1");
  // The broker let the worker go at once (DISCONNECT), rather than timing it out.
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.workers == 0 && s.disconnects == 1; }));
  CHECK(broker->stats().workers_expired == 0);
}

TEST_CASE("memodb: a paused serve's workers leave, resume registers them again", "[memodb]") {
  auto options = fast();
  options.heartbeat_interval = 100ms;
  options.heartbeat_timeout = 200ms;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=2"));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("p", [](Message& m) { return "p:" + std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "p") == 2; }));
  sub.pause();
  // Each stops at its next HEARTBEAT without answering; the broker forgets it.
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.workers == 0; }));
  Replies replies;
  client.request("p", "queued", 20s, [&](Reply r) { replies.add(0, std::move(r)); });
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.queued == 1; }));
  sub.resume();
  REQUIRE(replies.wait_for(1));
  CHECK(replies.all()[0][0].payload == "p:queued");
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "p") == 2; }));
}

TEST_CASE("memodb: set_max_in_flight sets a serve's number of workers", "[memodb]") {
  auto options = fast();
  options.heartbeat_interval = 100ms;
  options.heartbeat_timeout = 200ms;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=2&handler_concurrency=5"));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("s", [](Message& m) { return std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "s") == 2; }));
  sub.set_max_in_flight(5);
  REQUIRE(
      wait(*broker, [](const BrokerStats& s) { return workers_for(s, "s") == 5 && s.idle == 5; }));
  sub.set_max_in_flight(1);
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return workers_for(s, "s") == 1; }));
  CHECK(broker->stats().registrations == 5);
  for (int i = 0; i < 5; ++i)
    CHECK(client.request_sync("s", std::to_string(i), 10s).payload == std::to_string(i));
}

TEST_CASE(
    "memodb: a serve handler that throws sends no RESULT (memo01 has no error reply): "
    "the requester times out and the worker registers again",
    "[memodb]") {
  auto options = fast();
  auto broker = Broker::launch(options);
  Errors errors;
  ConnectOptions on_error;
  on_error.on_error = [&](std::error_code ec, const std::string&) { errors.add(ec); };
  auto server = connect(url_of(*broker, options, "workers=1"), on_error);
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("fragile", [](Message& m) -> std::string {
    if (m.payload() == "boom") throw std::runtime_error("boom");
    return "ok";
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  CHECK(client.request_sync("fragile", "boom", 300ms).ec == errc::timeout);
  REQUIRE(errors.wait_for(core_category()));
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.registrations == 2 && s.idle >= 1; }));
  CHECK(client.request_sync("fragile", "fine", 10s).payload == "ok");
}

TEST_CASE("memodb: the test brokers registered with polybus::testing serve request/reply",
          "[memodb]") {
  memodb::register_scheme();
  memodb::testing::register_test_brokers();
  for (const auto& factory : polybus::testing::test_brokers()) {
    if (factory.scheme.rfind("memodb+", 0) != 0) continue;
    DYNAMIC_SECTION(factory.name) {
      auto test_broker = factory.start();
      CHECK_FALSE(test_broker->answers_ping());
      auto server = connect(test_broker->url());
      auto client = connect(test_broker->url());
      CHECK(client.scheme() == factory.scheme);
      auto sub = server.serve("t", [](Message& m) { return "t:" + std::string(m.payload()); });
      REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
      CHECK(client.request_sync("t", "1", 10s).payload == "t:1");
      test_broker->restart();
      CHECK(client.request_sync("t", "2", 10s).payload == "t:2");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The test broker's journal and fault rules, seen through real clients and workers.

namespace {

using polybus::testing::JournalEntry;
using polybus::testing::parse_fault_rule;

BrokerOptions fast_with_faults(std::initializer_list<const char*> rules) {
  BrokerOptions options = fast();
  for (const char* rule : rules) options.faults.push_back(parse_fault_rule(rule));
  return options;
}

// Every entry as a JSON line, for a failure to show.
std::string journal_lines(const polybus::testing::Journal& journal) {
  std::string lines;
  for (const JournalEntry& e : journal.entries())
    lines += polybus::testing::Journal::json_line(e) + "\n";
  return lines;
}

}  // namespace

TEST_CASE(
    "memodb: the test broker's journal shows a READY, the JOB in and out and the RESULT in "
    "and out, in order",
    "[memodb][journal]") {
  auto options = fast();
  options.journal_capacity = 10000;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  const auto reply = client.request_sync("echo", "hello", 10s);
  REQUIRE(reply.ec == std::error_code{});
  REQUIRE(reply.payload == "e:hello");

  auto& journal = broker->journal();
  INFO(journal_lines(journal));
  const auto only = [&](const std::function<bool(const JournalEntry&)>& match) {
    const auto found = journal.entries(match);
    REQUIRE(found.size() == 1);
    return found.front();
  };
  const JournalEntry ready =
      only([](const JournalEntry& e) { return e.received && e.kind == "READY"; });
  const JournalEntry job_in =
      only([](const JournalEntry& e) { return e.received && e.kind == "JOB"; });
  const JournalEntry job_out =
      only([](const JournalEntry& e) { return !e.received && e.kind == "JOB"; });
  const JournalEntry result_in =
      only([](const JournalEntry& e) { return e.received && e.kind == "RESULT"; });
  const JournalEntry result_out =
      only([](const JournalEntry& e) { return !e.received && e.kind == "RESULT"; });
  CHECK(ready.topic == "echo");
  CHECK(ready.id.empty());
  // The client's JOB: its service, timeout and payload; no ID (clients have none).
  CHECK(job_in.topic == "echo");
  CHECK(job_in.id.empty());
  CHECK(job_in.count > 0);
  CHECK(job_in.bytes == 5);
  CHECK(job_in.connection != ready.connection);
  // Handed to the worker that sent the READY, with its 4-byte ID.
  CHECK(job_out.connection == ready.connection);
  CHECK(job_out.id.size() == 8);
  CHECK(job_out.topic == "echo");
  CHECK(job_out.count == job_in.count);
  CHECK(job_out.bytes == 5);
  // The worker's RESULT, and the RESULT handed to the client.
  CHECK(result_in.connection == ready.connection);
  CHECK(result_in.id == job_out.id);
  CHECK(result_in.topic == "echo");
  CHECK(result_in.bytes == 7);
  CHECK(result_out.connection == job_in.connection);
  CHECK(result_out.id.empty());
  CHECK(result_out.topic == "echo");
  CHECK(result_out.bytes == 7);
  CHECK(ready.seq < job_in.seq);
  CHECK(job_in.seq < job_out.seq);
  CHECK(job_out.seq < result_in.seq);
  CHECK(result_in.seq < result_out.seq);
}

TEST_CASE(
    "memodb: the test broker's error rule answers DISCONNECT: a JOB fails, a worker "
    "registers again, and both go on",
    "[memodb][faults]") {
  SECTION("a JOB answered DISCONNECT fails with protocol_error; the next is served") {
    auto options = fast_with_faults({"unit=JOB,nth=2,error=no capacity"});
    options.journal_capacity = 1000;
    auto broker = Broker::launch(options);
    auto server = connect(url_of(*broker, options, "workers=1"));
    auto client = connect(url_of(*broker, options));
    auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
    REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
    CHECK(client.request_sync("echo", "1", 10s).payload == "e:1");
    const auto refused = client.request_sync("echo", "2", 10s);
    CHECK(refused.ec == errc::protocol_error);
    CHECK_THAT(refused.detail, Catch::Contains("DISCONNECT"));
    CHECK(client.request_sync("echo", "3", 10s).payload == "e:3");
    const auto disconnects = broker->journal().entries(
        [](const JournalEntry& e) { return !e.received && e.kind == "DISCONNECT"; });
    REQUIRE(disconnects.size() == 1);
    CHECK(disconnects[0].text == "no capacity");
    CHECK(broker->stats().dispatched == 2);  // the refused JOB was never run
  }
  SECTION("a READY answered DISCONNECT: the worker sends READY again and serves") {
    auto options = fast_with_faults({"unit=READY,once,error=not now"});
    auto broker = Broker::launch(options);
    auto server = connect(url_of(*broker, options, "workers=1"));
    auto client = connect(url_of(*broker, options));
    auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
    REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.registrations == 1; }));
    CHECK(broker->stats().disconnects == 1);
    CHECK(client.request_sync("echo", "x", 10s).payload == "e:x");
  }
  SECTION("a fatal error closes the connection after the DISCONNECT; the client reconnects") {
    auto options = fast_with_faults({"unit=JOB,once,fatal,error=going away"});
    options.journal_capacity = 1000;
    auto broker = Broker::launch(options);
    auto server = connect(url_of(*broker, options, "workers=1"));
    auto client = connect(url_of(*broker, options));
    auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
    REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
    CHECK(client.request_sync("echo", "1", 10s).ec == errc::protocol_error);
    CHECK(client.request_sync("echo", "2", 10s).payload == "e:2");
    const auto jobs = broker->journal().entries(
        [](const JournalEntry& e) { return e.received && e.kind == "JOB"; });
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].connection != jobs[1].connection);
  }
}

TEST_CASE(
    "memodb: the test broker's swallowed JOB gets no reply, and the client's req0 sends it "
    "again after its resend time and is served",
    "[memodb][faults]") {
  auto options = fast_with_faults({"unit=JOB,once,swallow"});
  options.queue_timeout = 200ms;
  options.journal_capacity = 1000;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  // Resent after queue_timeout + job_timeout + 1 s.
  auto client = connect(url_of(*broker, options, "job_timeout=200ms"));
  Latch handled;
  auto sub = server.serve("echo", [&](Message& m) {
    handled.count_down();
    return "e:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  const auto reply = client.request_sync("echo", "again", 10s);
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "e:again");
  CHECK(handled.count() == 1);
  const auto jobs = broker->journal().entries(
      [](const JournalEntry& e) { return e.received && e.kind == "JOB"; });
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].connection == jobs[1].connection);
  CHECK(broker->stats().dropped == 1);
  CHECK(broker->faults().fired(1) == 1);
}

TEST_CASE("memodb: the test broker's delay holds the client's RESULT for the delay",
          "[memodb][faults]") {
  constexpr auto kDelay = 300ms;
  auto options = fast_with_faults({"unit=JOB,once,delay=300"});
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options));
  auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  const auto start = std::chrono::steady_clock::now();
  const auto held = client.request_sync("echo", "late", 10s);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(held.payload == "e:late");
  CHECK(took >= kDelay);  // the timer fires no earlier
  CHECK(client.request_sync("echo", "now", 10s).payload == "e:now");
  CHECK(broker->faults().fired(1) == 1);
}

TEST_CASE(
    "memodb: the test broker's close and reset on a JOB: the client sends it again on its "
    "next connection and is served",
    "[memodb][faults]") {
  const std::string action = GENERATE(as<std::string>{}, "close", "reset");
  CAPTURE(action);
  auto options = fast_with_faults({("unit=JOB,once," + action).c_str()});
  options.journal_capacity = 1000;
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  StateRecorder states;
  ConnectOptions on_state;
  on_state.on_state = states.callback();
  auto client = connect(url_of(*broker, options), on_state);
  auto sub = server.serve("echo", [](Message& m) { return "e:" + std::string(m.payload()); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  const auto reply = client.request_sync("echo", "x", 10s);
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "e:x");
  const auto jobs = broker->journal().entries(
      [](const JournalEntry& e) { return e.received && e.kind == "JOB"; });
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].connection != jobs[1].connection);
  const auto lost =
      states.wait_for([](const StateEvent& e) { return e.state == ConnectionState::disconnected; });
  REQUIRE(lost);
  const std::string why = states.at(*lost).detail;
  CAPTURE(why);
  CHECK((why.find("reset") != std::string::npos) == (action == "reset"));
}

TEST_CASE("memodb: the test broker's duplicated JOB is run twice and answered once",
          "[memodb][faults]") {
  auto options = fast_with_faults({"unit=JOB,once,duplicate"});
  auto broker = Broker::launch(options);
  auto server = connect(url_of(*broker, options, "workers=1"));
  auto client = connect(url_of(*broker, options));
  Collector handled;
  auto sub = server.serve("echo", [&](Message& m) {
    handled.add(std::string(m.payload()));
    return "e:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  const auto reply = client.request_sync("echo", "twice", 10s);
  CHECK(reply.payload == "e:twice");
  REQUIRE(handled.wait_for_count(2));
  CHECK(handled.count("twice") == 2);
  // The second RESULT found its request answered, and the worker went on.
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.results == 2 && s.idle == 1; }));
  CHECK(client.request_sync("echo", "once", 10s).payload == "e:once");
  CHECK(handled.count("once") == 1);
}

TEST_CASE("memodb: the test broker's probability rule with a seed fails the same JOBs twice",
          "[memodb][faults]") {
  const auto failures = [] {
    auto options = fast_with_faults({"unit=JOB,probability=0.5,seed=7,error=unlucky"});
    auto broker = Broker::launch(options);
    auto server = connect(url_of(*broker, options, "workers=1"));
    auto client = connect(url_of(*broker, options));
    auto sub = server.serve("echo", [](Message& m) { return std::string(m.payload()); });
    REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
    std::vector<int> failed;
    for (int i = 0; i < 20; ++i) {
      const auto reply = client.request_sync("echo", "x", 10s);
      REQUIRE((reply.ec == std::error_code{} || reply.ec == errc::protocol_error));
      if (reply.ec) failed.push_back(i);
    }
    return failed;
  };
  const std::vector<int> first = failures();
  CHECK_FALSE(first.empty());
  CHECK(first.size() < 20);
  CHECK(failures() == first);
}

TEST_CASE(
    "memodb: on a manual clock queue_timeout and a job's timeout at its worker come due as the "
    "test advances it",
    "[memodb][clock]") {
  auto options = fast();
  options.queue_timeout = 30s;
  options.clock = std::make_shared<polybus::ManualClock>();
  options.journal_capacity = 1000;
  auto broker = Broker::launch(options);
  auto client = connect(url_of(*broker, options));
  // No worker for "nobody": the job waits in the queue for queue_timeout. The request's own
  // deadline is the client's, on the real clock: short, so that closing waits for nothing.
  client.request("nobody", "x", 1s, [](Reply) {});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.jobs == 1; }));
  options.clock->advance(29s);
  CHECK(broker->stats().queue_expired == 0);
  options.clock->advance(1s);
  CHECK(broker->stats().queue_expired == 1);  // dropped before advance() returned

  // A worker that holds its job past the job's timeout (what is left of the request's deadline).
  auto server = connect(url_of(*broker, options, "workers=1"));
  Gate release;
  auto sub = server.serve("slow", [&](Message& m) {
    release.wait();
    return std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(wait(*broker, [](const BrokerStats& s) { return s.idle == 1; }));
  client.request("slow", "y", 1s, [](Reply) {});
  // The JOB handed to the worker, and its timeout waiting on the clock (the stats are published
  // once the broker did both).
  REQUIRE(wait(*broker,
               [&](const BrokerStats& s) { return s.idle == 0 && options.clock->pending() == 1; }));
  const auto job = broker->journal().entries(
      [](const polybus::testing::JournalEntry& e) { return !e.received && e.kind == "JOB"; });
  REQUIRE(job.size() == 1);
  const std::chrono::milliseconds timeout(job[0].count);
  REQUIRE(timeout > 1ms);
  options.clock->advance(timeout - 1ms);
  CHECK(broker->stats().workers_expired == 0);
  options.clock->advance(1ms);
  CHECK(broker->stats().workers_expired == 1);
  release.open();
  CHECK(client.close_sync(10s) == std::error_code{});
  CHECK(server.close_sync(10s) == std::error_code{});
}
