// SPDX-License-Identifier: Apache-2.0
// The chaos run: every scheme that speaks TCP carries a stream of publishes to a subscriber through
// a fault proxy while a schedule of faults plays (resets mid-frame, latency spikes, blackholes
// shorter and longer than the heartbeat timeout, 1-byte slices, a thin link, refused and half-open
// connections, a broker restart), then closes under a blackhole. The guarantees are those without
// faults: every publish completes exactly once, nothing the broker acknowledged is lost, order
// holds where it is claimed, the client recovers once the faults stop, close keeps its deadline.
//
// The schedule comes from a seed: POLYBUS_CHAOS_SEED=N replays a failing run (the seed is printed
// first); POLYBUS_CHAOS_SECONDS sets the schedule's length (default 6).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "polybus/all.hpp"
#include "polybus/fault_proxy.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/quickio_testing.hpp"
#include "polybus/testing.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace std::chrono_literals;
using testing::Direction;
using testing::FaultProxy;
using testing::Faults;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

namespace {

// Options every chaos URL carries: liveness well under the schedule's long blackhole, and
// deadlines short enough that a swallowed attempt gives up within a step.
const std::map<std::string, std::string> kChaosOptions = {
    {"connect_timeout", "1s"},
    {"op_timeout", "4s"},
    {"reconnect_initial", "10ms"},
    {"reconnect_max", "250ms"},
};
// Per scheme: its heartbeat, so that a blackhole longer than kLongBlackhole is noticed.
const std::map<std::string, std::map<std::string, std::string>> kLivenessOptions = {
    {"nsq", {{"heartbeat_interval", "1s"}}},
    {"nsq+lookupd",
     {{"heartbeat_interval", "1s"}, {"lookupd_poll_interval", "200ms"}, {"msg_timeout", "1s"}}},
    {"figg", {{"ping_interval", "200ms"}}},
    {"quickio", {{"heartbeat_timeout", "1500ms"}}},
    {"quickio+ws", {{"heartbeat_timeout", "1500ms"}}},
    {"quickio+http", {{"heartbeat_timeout", "1500ms"}, {"http_request_timeout", "1500ms"}}},
    {"memodb+tcp", {{"heartbeat_interval", "500ms"}, {"heartbeat_timeout", "1s"}}},
};
constexpr ms kLongBlackhole{2500};  // over every liveness bound above
constexpr ms kShortBlackhole{250};  // under all of them
// After the faults stop, a marker must arrive within this: one reconnect delay (reconnect_max),
// a swallowed connect (connect_timeout), the liveness bound, and slack for a loaded machine.
constexpr ms kRecoveryBound{15000};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// A broker behind one or more fault proxies (nsq+lookupd: the lookupd's and the nsqd's).
struct Target {
  std::string name;
  std::string url;
  Capabilities caps;
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  std::function<void()> restart;
  std::function<void(const std::string& topic)> prepare_topic = [](const std::string&) {};
  std::unique_ptr<testing::TestBroker> broker;
  std::unique_ptr<nsq::testing::Lookupd> lookupd;
  std::unique_ptr<nsq::testing::Nsqd> nsqd;
  std::unique_ptr<quickio::testing::Server> quickio;
  std::unique_ptr<memodb::testing::Broker> memodb;

  void for_each_proxy(const std::function<void(FaultProxy&)>& fn) {
    for (auto& p : proxies) fn(*p);
  }
};

std::string with_options(const Url& url, const std::string& authority) {
  std::map<std::string, std::string> query(url.query.values().begin(), url.query.values().end());
  for (const auto& [k, v] : kChaosOptions) query[k] = v;
  if (auto it = kLivenessOptions.find(url.scheme); it != kLivenessOptions.end())
    for (const auto& [k, v] : it->second) query[k] = v;
  std::string out = url.scheme + "://" + authority + url.path;
  char sep = '?';
  for (const auto& [k, v] : query) {
    out += sep + k + "=" + v;
    sep = '&';
  }
  return out;
}

std::unique_ptr<FaultProxy> proxy_to(std::uint16_t port, std::uint64_t seed) {
  testing::FaultProxyOptions options;
  options.upstream_port = port;
  options.seed = seed;
  return std::make_unique<FaultProxy>(options);
}

std::unique_ptr<Target> start_target(const std::string& name, std::uint64_t seed) {
  auto t = std::make_unique<Target>();
  t->name = name;
  if (name == "nsq+lookupd") {
    // The nsqd is announced at the proxy's port, so that the client's nsqd connection goes
    // through it too.
    t->lookupd = nsq::testing::Lookupd::start();
    t->nsqd = nsq::testing::Nsqd::start();
    const auto lookupd_url = Url::parse("nsq+lookupd://" + t->lookupd->http_address());
    t->proxies.push_back(proxy_to(lookupd_url.hosts.at(0).port, seed));
    t->proxies.push_back(proxy_to(t->nsqd->tcp_port(), seed + 1));
    const auto nsqd_port = t->proxies.back()->port();
    t->prepare_topic = [t = t.get(), nsqd_port](const std::string& topic) {
      t->lookupd->add_producer(topic, "127.0.0.1", nsqd_port);
    };
    t->restart = [t = t.get()] { t->nsqd->restart(); };
    t->url = with_options(lookupd_url, t->proxies.front()->address());
  } else if (name.rfind("quickio", 0) == 0) {
    // The server heartbeats every 500 ms (the registry's broker, like the real server, every
    // 55 s), so that the client's 1.5 s heartbeat timeout tells a blackhole from an idle link.
    quickio::testing::ServerOptions options;
    options.heartbeat_interval = 500ms;
    t->quickio = quickio::testing::Server::launch(options);
    t->proxies.push_back(proxy_to(t->quickio->port(), seed));
    t->restart = [t = t.get()] {
      t->quickio->stop();
      t->quickio->start();
    };
    t->url =
        with_options(Url::parse(name + "://" + t->quickio->address() + "?http_poll_delay_max=20ms"),
                     t->proxies.front()->address());
  } else if (name == "memodb+tcp") {
    // The broker's timings are the client's (memo01's resend times are derived from them), and
    // short, like the liveness of the other schemes.
    memodb::testing::BrokerOptions options;
    options.heartbeat_interval = 500ms;
    options.heartbeat_timeout = 1s;
    options.queue_timeout = 5s;
    t->memodb = memodb::testing::Broker::launch(options);
    const auto url = Url::parse("memodb+" + t->memodb->url() + "?queue_timeout=5s");
    t->proxies.push_back(proxy_to(url.hosts.at(0).port, seed));
    t->restart = [t = t.get()] {
      t->memodb->stop();
      t->memodb->start();
    };
    t->url = with_options(url, t->proxies.front()->address());
  } else {
    for (const auto& f : testing::test_brokers())
      if (f.name == name) t->broker = f.start();
    REQUIRE(t->broker);
    const auto url = Url::parse(t->broker->url());
    t->proxies.push_back(proxy_to(url.hosts.at(0).port, seed));
    t->restart = [t = t.get()] { t->broker->restart(); };
    t->url = with_options(url, t->proxies.front()->address());
  }
  const auto info = describe_scheme(Url::parse(t->url).scheme);
  REQUIRE(info.has_value());
  t->caps = info->capabilities;
  return t;
}

// One step of the schedule: what it does to the proxies, and for how long.
struct Step {
  std::string what;
  std::function<void(Target&)> apply;
  ms hold;
};

std::vector<Step> make_schedule(std::mt19937_64& rng, ms length) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto direction = [&] { return pick(0, 1) ? Direction::to_upstream : Direction::to_client; };
  auto name_of = [](Direction d) { return d == Direction::to_upstream ? "up" : "down"; };
  // The same faults both ways on every proxy of the target.
  auto everywhere = [](Faults f) {
    return [f](Target& t) { t.for_each_proxy([&](FaultProxy& p) { p.set_faults(f); }); };
  };
  Faults blackhole;
  blackhole.blackhole = true;
  using Kind = std::function<Step()>;
  std::vector<Kind> kinds = {
      [&] {
        Faults f;
        f.reset_after_bytes = static_cast<std::uint64_t>(pick(1, 400));
        const auto d = direction();
        return Step{
            "reset " + std::string(name_of(d)) + " after " + std::to_string(f.reset_after_bytes) +
                " B",
            [f, d](Target& t) { t.for_each_proxy([&](FaultProxy& p) { p.set_faults(d, f); }); },
            ms(pick(200, 500))};
      },
      [&] {
        Faults f;
        f.latency = ms(pick(50, 400));
        f.jitter = ms(pick(0, 100));
        return Step{"latency " + std::to_string(f.latency.count()) + " ms +" +
                        std::to_string(f.jitter.count()),
                    everywhere(f), ms(pick(300, 800))};
      },
      [&] {
        return Step{"short blackhole", everywhere(blackhole), kShortBlackhole};
      },
      [&] {
        return Step{"long blackhole", everywhere(blackhole), kLongBlackhole};
      },
      [&] {
        Faults f;
        f.slice_bytes = 1;
        f.slice_delay = ms(pick(0, 1));
        return Step{"1-byte slices, " + std::to_string(f.slice_delay.count()) + " ms apart",
                    everywhere(f), ms(pick(300, 600))};
      },
      [&] {
        Faults f;
        f.bytes_per_second = static_cast<std::uint64_t>(pick(20, 100)) * 1024;
        return Step{"thin link " + std::to_string(f.bytes_per_second / 1024) + " KiB/s",
                    everywhere(f), ms(pick(300, 600))};
      },
      [&] {
        const auto refuse = ms(pick(100, 500));
        return Step{"reset all, refuse " + std::to_string(refuse.count()) + " ms",
                    [refuse](Target& t) {
                      t.for_each_proxy([&](FaultProxy& p) {
                        p.refuse_connections(refuse);
                        p.reset_connections();
                      });
                    },
                    refuse};
      },
      [&] {
        const auto d = direction();
        return Step{
            "half-open, " + std::string(name_of(d)) + " closed",
            [d](Target& t) { t.for_each_proxy([&](FaultProxy& p) { p.close_one_side(d); }); },
            ms(pick(100, 300))};
      },
      [&] {
        return Step{"broker restart", [](Target& t) { t.restart(); }, ms(pick(100, 300))};
      },
  };
  // POLYBUS_CHAOS_ONLY=2,3 keeps those kinds (by their place in the list above), to find
  // which fault a failing seed needs.
  std::set<std::size_t> kept;
  if (const char* only = std::getenv("POLYBUS_CHAOS_ONLY"); only && *only) {
    std::stringstream list(only);
    for (std::string item; std::getline(list, item, ',');) kept.insert(std::stoul(item));
  }
  std::vector<Kind> chosen;
  for (std::size_t k = 0; k < kinds.size(); ++k)
    if (kept.empty() || kept.count(k)) chosen.push_back(kinds[k]);
  REQUIRE(!chosen.empty());
  kinds = chosen;
  // Every kind once, in a random order; then random kinds while there is time.
  std::vector<std::size_t> order(kinds.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Step> steps;
  ms total{0};
  for (std::size_t i = 0; i < order.size() || total < length; ++i) {
    const auto k =
        i < order.size() ? order[i] : static_cast<std::size_t>(pick(0, kinds.size() - 1));
    steps.push_back(kinds[k]());
    total += steps.back().hold + ms(200);
  }
  return steps;
}

// At most `limit` publishes outstanding.
class Window {
 public:
  explicit Window(int limit) : limit_(limit) {}
  void enter() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return open_ < limit_; });
    ++open_;
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    --open_;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int open_ = 0;
  const int limit_;
};

void run_chaos(const std::string& name) {
  const std::uint64_t seed = env_number("POLYBUS_CHAOS_SEED", 1);
  const ms length{env_number("POLYBUS_CHAOS_SECONDS", 6) * 1000};
  std::mt19937_64 rng(seed);
  auto target = start_target(name, seed);
  const auto steps = make_schedule(rng, length);
  std::ostringstream plan;
  plan << "chaos " << name << ": seed " << seed << " (POLYBUS_CHAOS_SEED), " << target->url
       << "\n  schedule:";
  for (const auto& s : steps) plan << " [" << s.what << ", " << s.hold.count() << " ms]";
  std::cout << plan.str() << std::endl;
  INFO(plan.str());

  std::atomic<int> disconnects{0};
  std::mutex events_mutex;
  std::vector<std::string> events;  // the clients' last state events, for a failure's message
  auto recording = [&](std::string who) {
    ConnectOptions options;
    options.on_state = [&, who](const StateEvent& e) {
      if (e.state == ConnectionState::disconnected) ++disconnects;
      std::lock_guard<std::mutex> lock(events_mutex);
      events.push_back(who + ": " + to_string(e.state) + " " + e.endpoint + " " + e.detail);
      if (events.size() > 16) events.erase(events.begin());
    };
    if (std::getenv("POLYBUS_CHAOS_VERBOSE")) {
      options.log_level = LogLevel::debug;
      options.log = [who](LogLevel, std::string_view line) {
        std::cout << who << " log: " << line << std::endl;
      };
    }
    options.on_error = [&, who](std::error_code, const std::string& what) {
      std::lock_guard<std::mutex> lock(events_mutex);
      events.push_back(who + " error: " + what);
      if (std::getenv("POLYBUS_CHAOS_VERBOSE")) std::cout << who << " error: " << what << std::endl;
      if (events.size() > 16) events.erase(events.begin());
    };
    return options;
  };
  auto last_events = [&] {
    std::lock_guard<std::mutex> lock(events_mutex);
    std::string out;
    for (const auto& e : events) out += "\n    " + e;
    return out;
  };
  // Declared before the clients: handlers may still run while the clients close.
  test::Collector got;
  const auto topic = test::unique_name("chaos");
  target->prepare_topic(topic);
  auto subscriber = polybus::connect(target->url, recording("subscriber"));
  auto publisher = polybus::connect(target->url, recording("publisher"));
  SubscribeOptions sub_options;
  if (target->caps.consumer_groups) sub_options.group = "chaos";
  sub_options.max_in_flight = 50;
  sub_options.concurrency = target->caps.ordered_delivery ? 1 : 4;
  // A scheme without publish/subscribe (MemoDB) carries requests to a server that echoes them.
  const bool requests = !target->caps.subscribe;
  REQUIRE((requests ? target->caps.request_reply : target->caps.publish));
  auto sub = requests ? subscriber.serve(topic, sub_options,
                                         [](Message& m) { return std::string(m.payload()); })
                      : subscriber.subscribe(topic, sub_options, [&](Message& m) {
                          got.add(std::string(m.payload()));
                        });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  std::atomic<int> wrong_replies{0};
  std::mutex wrong_mutex;
  std::string first_wrong;
  // One message (a publish, or a request whose reply must echo it); done gets its result.
  auto send = [&](const std::string& payload, std::function<void(std::error_code)> done) {
    if (!requests) return publisher.publish(topic, payload, std::move(done));
    publisher.request(topic, payload, [&, payload, done = std::move(done)](Reply r) {
      if (!r.ec && r.payload != payload && ++wrong_replies == 1) {
        std::lock_guard<std::mutex> lock(wrong_mutex);
        first_wrong = "the request " + payload + " got the reply '" + r.payload.substr(0, 40) + "'";
      }
      done(r.ec);
    });
  };

  // The publisher: a steady stream while the schedule plays, at most 20 outstanding.
  constexpr int kMaxPublishes = 200000;
  std::vector<std::atomic<int>> completions(kMaxPublishes);
  std::vector<std::error_code> results(kMaxPublishes);
  std::atomic<int> published{0};
  std::atomic<int> first_after_restart{kMaxPublishes};
  std::atomic<bool> stop_publishing{false};
  test::Latch completed;
  Window window(20);
  std::thread publishing([&] {
    for (int i = 0; i < kMaxPublishes && !stop_publishing; ++i) {
      window.enter();
      published = i + 1;
      send("m" + std::to_string(i), [&, i](std::error_code ec) {
        results[i] = ec;
        ++completions[i];
        window.leave();
        completed.count_down();
      });
      std::this_thread::sleep_for(1ms);  // pacing, not synchronisation: a stream, not a flood
    }
  });

  for (const auto& step : steps) {
    step.apply(*target);
    std::this_thread::sleep_for(step.hold);  // the fault's duration is the point of the step
    target->for_each_proxy([](FaultProxy& p) { p.clear_faults(); });
    if (step.what == "broker restart") first_after_restart = published.load();
    std::this_thread::sleep_for(200ms);  // calm between faults
  }
  stop_publishing = true;
  publishing.join();
  const int total = published;
  // Every publish completes: the slowest within op_timeout (4 s) of the faults' end.
  REQUIRE(completed.wait_for(static_cast<std::size_t>(total)));

  // Recovery: once the faults stop, a marker reaches the subscriber.
  const auto calm = Clock::now();
  bool recovered = false;
  int markers = 0, markers_failed = 0;
  std::string marker_error;
  while (!recovered && Clock::now() - calm < kRecoveryBound) {
    ++markers;
    if (requests) {
      const Reply r = publisher.request_sync(topic, "marker");
      recovered = !r.ec && r.payload == "marker";
      if (r.ec) ++markers_failed, marker_error = r.status().message();
      continue;
    }
    if (const Status st = publisher.publish_sync(topic, "marker"); st) {
      ++markers_failed;
      marker_error = st.message();
    }
    recovered = got.wait_until([](const auto& seen) { return seen.count("marker") > 0; }, 200ms);
  }
  const auto recovery = std::chrono::duration_cast<ms>(Clock::now() - calm);
  std::string broker_state;
  if (target->memodb) {
    const auto st = target->memodb->stats();
    broker_state = "; broker: " + std::to_string(st.workers) + " workers (" +
                   std::to_string(st.idle) + " idle), " + std::to_string(st.queued) + " queued, " +
                   std::to_string(st.jobs) + " jobs, " + std::to_string(st.dispatched) +
                   " dispatched, " + std::to_string(st.results) + " results, " +
                   std::to_string(st.registrations) + " READYs, " + std::to_string(st.connections) +
                   " connections";
  }
  INFO(markers << " markers published, " << markers_failed
               << " failed, the last with: " << marker_error << "; subscriber stats: received "
               << subscriber.stats().received << ", reconnects " << subscriber.stats().reconnects
               << broker_state << "; last state events:" << last_events());
  CHECK(recovered);

  std::vector<int> acked;
  int failed = 0;
  for (int i = 0; i < total; ++i) {
    REQUIRE(completions[i].load() == 1);
    if (!results[i])
      acked.push_back(i);
    else
      ++failed;
  }
  CHECK(!acked.empty());
  // Nothing acknowledged is lost: what the broker confirmed arrives (a broker that keeps nothing
  // across its restart: what it confirmed after it).
  {
    std::lock_guard<std::mutex> lock(wrong_mutex);
    INFO(wrong_replies << " replies did not echo their request, e.g. " << first_wrong);
    CHECK(wrong_replies == 0);
  }
  if (!requests && target->caps.publish_confirmed) {
    std::vector<int> expected;
    for (int i : acked)
      if (target->caps.durable || i >= first_after_restart) expected.push_back(i);
    std::string missing;
    std::size_t missing_count = 0;
    const bool all_arrived = got.wait_until([&](const std::map<std::string, int>& seen) {
      missing.clear();
      missing_count = 0;
      for (int i : expected)
        if (!seen.count("m" + std::to_string(i)) && ++missing_count <= 10)
          missing += "m" + std::to_string(i) + " ";
      return missing_count == 0;
    });
    INFO(missing_count << " of " << expected.size() << " acknowledged never arrived, e.g. "
                       << missing);
    CHECK(all_arrived);
  }
  // Order: the first arrival of each acknowledged message, in publish order. Where publishes
  // are only written, not confirmed (QuickIO), order holds per connection: bytes a blackhole
  // held on a connection the client then gave up on reach the server after those sent on the
  // next one, as a stale TCP connection's would.
  if (!requests && target->caps.ordered_delivery && target->caps.publish_confirmed) {
    std::set<std::string> acked_names;
    for (int i : acked) acked_names.insert("m" + std::to_string(i));
    std::set<std::string> seen;
    int last = -1;
    std::string broken;
    for (const auto& p : got.order()) {
      if (!acked_names.count(p) || !seen.insert(p).second) continue;
      const int i = std::stoi(p.substr(1));
      if (i < last && broken.empty()) broken = p + " after m" + std::to_string(last);
      last = std::max(last, i);
    }
    INFO("out of order: " << broken);
    CHECK(broken.empty());
  }

  // Close under a blackhole: publishes in flight, the deadline kept, each completes once.
  constexpr int kClosing = 200;
  std::vector<std::atomic<int>> closing_completions(kClosing);
  test::Latch closing_done, closed;
  target->for_each_proxy([](FaultProxy& p) {
    Faults f;
    f.blackhole = true;
    p.set_faults(f);
  });
  for (int i = 0; i < kClosing; ++i)
    send("c" + std::to_string(i), [&, i](std::error_code) {
      ++closing_completions[i];
      closing_done.count_down();
    });
  const auto close_started = Clock::now();
  publisher.close(2s, [&](std::error_code) { closed.count_down(); });
  REQUIRE(closed.wait_for(1, 10s));  // a failure bound well past the 2 s deadline
  const auto close_took = std::chrono::duration_cast<ms>(Clock::now() - close_started);
  REQUIRE(closing_done.wait_for(kClosing, 1s));
  for (int i = 0; i < kClosing; ++i) REQUIRE(closing_completions[i].load() == 1);
  target->for_each_proxy([](FaultProxy& p) { p.clear_faults(); });
  CHECK(subscriber.close_sync(5s) == std::error_code{});
  // Nothing completes twice, even later.
  CHECK(closing_done.count() == static_cast<std::size_t>(kClosing));
  CHECK(completed.count() == static_cast<std::size_t>(total));

  std::uint64_t resets = 0, refused = 0, discarded = 0, accepted = 0;
  target->for_each_proxy([&](FaultProxy& p) {
    const auto c = p.counters();
    resets += c.resets;
    refused += c.refused;
    accepted += c.accepted;
    discarded += c.to_upstream.discarded + c.to_client.discarded;
  });
  std::cout << "chaos " << name << ": " << total << " published, " << acked.size() << " acked, "
            << failed << " failed; " << got.distinct() << " distinct arrived (" << got.total()
            << " with redeliveries); " << disconnects << " disconnects; proxy: " << accepted
            << " connections, " << resets << " reset, " << refused << " refused, " << discarded
            << " B discarded; recovered in " << recovery.count() << " ms; close under blackhole "
            << close_took.count() << " ms" << std::endl;
}

}  // namespace

TEST_CASE("chaos: nsq", "[chaos]") {
  run_chaos("nsq");
}
TEST_CASE("chaos: nsq+lookupd", "[chaos]") {
  run_chaos("nsq+lookupd");
}
TEST_CASE("chaos: figg", "[chaos]") {
  run_chaos("figg");
}
TEST_CASE("chaos: quickio", "[chaos]") {
  run_chaos("quickio");
}
TEST_CASE("chaos: quickio+ws", "[chaos]") {
  run_chaos("quickio+ws");
}
TEST_CASE("chaos: quickio+http", "[chaos]") {
  run_chaos("quickio+http");
}
TEST_CASE("chaos: memodb+tcp", "[chaos]") {
  run_chaos("memodb+tcp");
}
