// SPDX-License-Identifier: Apache-2.0
#include "bench_run.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "bench/payload_stamp.hpp"
#include "bench/scale_run.hpp"
#include "polybus/middleware.hpp"
#include "polybus/tools/allocation_counter.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/windowed_publisher.hpp"

namespace polybus::cli {
namespace {

// --middleware's names, as the chain they make.
std::vector<Middleware> bench_middleware(const std::vector<std::string>& names) {
  std::vector<Middleware> chain;
  for (const auto& name : names) {
    if (name == "pass")
      chain.push_back([](Message& m, const MessageHandler& next) { next(m); });
    else if (name == "timeout")
      chain.push_back(middleware::timeout(std::chrono::minutes(10)));
    else if (name == "throttle")
      chain.push_back(middleware::throttle(1e9));
    else if (name == "circuit_breaker")
      chain.push_back(middleware::circuit_breaker());
    else if (name == "deduplicate")
      chain.push_back(middleware::deduplicate());
    else
      throw std::invalid_argument("unknown middleware '" + name + "'");
  }
  return chain;
}

using SteadyClock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

// "<seq> <send time ns> <filler>", at least size bytes only when size allows the header.
// "abcd...": the bytes after a payload's stamp, made once per run.
std::string bench_filler(std::size_t size) {
  std::string filler(size, ' ');
  for (std::size_t i = 0; i < size; ++i) filler[i] = static_cast<char>('a' + i % 26);
  return filler;
}

// One allocation and two copies: the benchmark's own cost per message stays out of the
// client's figures (bench_writer, for comparison, sends one buffer over and over).
// `stamp_ns`: the send time it carries (a paced run's scheduled time; else now).
std::string bench_payload(std::uint64_t seq, std::size_t size, const std::string& filler,
                          std::int64_t stamp_ns) {
  char head[64];
  char* end = std::to_chars(head, head + 32, seq).ptr;
  *end++ = ' ';
  end = std::to_chars(end, end + 24, stamp_ns).ptr;
  *end++ = ' ';
  const auto head_size = static_cast<std::size_t>(end - head);
  if (size <= head_size) return std::string(head, head_size);
  std::string payload(filler, 0, size);  // filler is at least size bytes
  std::memcpy(payload.data(), head, head_size);
  return payload;
}

// The send time of a payload bench_payload made; nothing for any other payload.
std::optional<std::int64_t> sent_at(std::string_view payload) {
  return bench::payload_stamp(payload);
}

class LatencyLog {
 public:
  explicit LatencyLog(std::size_t capacity) : micros_(capacity) {}
  void record(std::int64_t sent_ns) {
    auto i = next_.fetch_add(1);
    if (i < micros_.size())
      micros_[i] = static_cast<std::uint32_t>(std::max<std::int64_t>(0, now_ns() - sent_ns) / 1000);
  }
  void record(std::optional<std::int64_t> sent_ns) {
    if (sent_ns) record(*sent_ns);
  }
  std::size_t count() const { return std::min<std::size_t>(next_.load(), micros_.size()); }
  std::uint64_t percentile(double p) {
    std::size_t n = count();
    if (n == 0) return 0;
    std::size_t k = p >= 1.0 ? n - 1 : std::min(n - 1, static_cast<std::size_t>(p * n));
    std::nth_element(micros_.begin(), micros_.begin() + k, micros_.begin() + n);
    return micros_[k];
  }

 private:
  std::vector<std::uint32_t> micros_;
  std::atomic<std::size_t> next_{0};
};

std::int64_t stamp_of(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Paces one publisher at `rate` messages per second from `start`; unpaced when rate is 0.
class Pacer {
 public:
  Pacer(SteadyClock::time_point start, double rate) : start_(start), rate_(rate) {}
  bool paced() const { return rate_ > 0; }
  // Waits until message k is due and returns when it was due (now, unpaced).
  SteadyClock::time_point wait(std::uint64_t k) const {
    if (!paced()) return SteadyClock::now();
    const auto due = start_ + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(static_cast<double>(k) / rate_));
    std::this_thread::sleep_until(due);
    return due;
  }

 private:
  SteadyClock::time_point start_;
  double rate_;
};

}  // namespace

const char* mode_name(BenchMode mode) {
  switch (mode) {
    case BenchMode::pubsub:
      return "pubsub";
    case BenchMode::publish:
      return "publish";
    case BenchMode::consume:
      return "consume";
    case BenchMode::request:
      return "request";
  }
  return "?";
}

std::uint64_t BenchResult::latency_at(double percentile) const {
  for (const auto& [p, us] : latency_us)
    if (p == percentile) return us;
  return 0;
}

BenchResult run_bench_once(const BenchSettings& s, BenchClients& registry) {
  // The registry owns them (the metrics endpoint reports them after the run too).
  std::vector<ClientRef> run_clients;
  auto make_client = [&] {
    Client client = polybus::connect(s.url);
    ClientRef ref = client;
    run_clients.push_back(ref);
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.all.push_back(std::move(client));
    return ref;
  };
  ClientRef probe = make_client();
  const Capabilities caps = probe.capabilities();
  const bool pubsub = caps.publish && caps.subscribe;
  if (s.batch > 1 && !caps.batch_publish)
    throw UsageError(probe.scheme() + " has no batch publish: --batch needs it");
  if (!pubsub && !caps.request_reply)
    throw UsageError(probe.scheme() + " can neither publish/subscribe nor request/reply");
  if (s.requests && !caps.request_reply)
    throw UsageError(
        probe.scheme() +
        " has no request/reply: --requests needs it (NSQ and Figg: envelope=cloudevents "
        "in the URL)");
  const BenchMode mode = !pubsub || s.requests ? BenchMode::request
                         : s.subscribers == 0  ? BenchMode::publish
                         : s.publishers == 0   ? BenchMode::consume
                                               : BenchMode::pubsub;
  if (mode == BenchMode::request && (s.publishers == 0 || s.subscribers == 0))
    throw UsageError(probe.scheme() +
                     " only does request/reply: it needs a requester and a responder");
  if (s.group && !caps.consumer_groups)
    throw UsageError(probe.scheme() + " has no consumer groups: --group needs them");
  if (s.from && !caps.replay_from_offset)
    throw UsageError(probe.scheme() + " cannot replay from an offset: --from needs it");
  const bool delivering = mode == BenchMode::pubsub || mode == BenchMode::consume;
  // Every subscriber gets every message unless they share a group.
  const std::uint64_t copies = delivering && !caps.consumer_groups ? s.subscribers : 1;
  const std::uint64_t target = s.messages * copies;

  LatencyLog latencies(target);
  std::atomic<SteadyClock::rep> finished{0};  // when the count reached target
  const std::string filler = bench_filler(s.size);
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> confirmed{0};
  std::vector<Subscription> subs;
  const std::string group =
      s.group.value_or("bench-" + std::to_string(std::random_device{}() % 1000000));
  double cpu_start = 0;
  std::uint64_t allocations_start = 0;
  SteadyClock::time_point start;
  auto start_clock = [&] {
    cpu_start = bench::cpu_seconds();
    allocations_start = allocations_so_far();
    start = SteadyClock::now();
  };
  // Consume only: the subscriptions are the work, so the clock runs from before them.
  if (mode == BenchMode::consume) start_clock();
  for (std::uint64_t i = 0; i < s.subscribers; ++i) {
    ClientRef c = i == 0 ? probe : make_client();
    SubscribeOptions options;
    options.max_in_flight = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.window, 2500));
    options.concurrency = static_cast<std::uint32_t>(s.concurrency);
    options.from_offset = s.from;
    options.middleware = bench_middleware(s.middleware);
    if (mode == BenchMode::request) {
      subs.push_back(
          c.serve(s.topic, options, [](Message& m) { return std::string(m.payload()); }));
    } else {
      if (caps.consumer_groups) options.group = group;
      auto take = [&](Message& m) {
        latencies.record(sent_at(m.payload()));
        if (++received == target) finished.store(SteadyClock::now().time_since_epoch().count());
      };
      if (s.batch_consume) {
        options.max_in_flight = std::max<std::uint32_t>(
            options.max_in_flight, static_cast<std::uint32_t>(s.batch_consume));
        subs.push_back(c.subscribe_batch(
            s.topic, options,
            BatchOptions{static_cast<std::uint32_t>(s.batch_consume), s.batch_wait},
            [take](Batch& batch) {
              for (Message& m : batch) take(m);
            }));
      } else {
        subs.push_back(c.subscribe(s.topic, options, take));
      }
    }
  }
  for (auto& sub : subs)
    if (auto ec = sub.wait_ready(std::chrono::seconds(30)))
      throw std::runtime_error("subscription failed: " + ec.message());

  if (mode != BenchMode::consume) start_clock();
  std::atomic<std::uint64_t> publish_failures{0};
  // The first failure's words: a run that fails says why, not only how often.
  std::mutex first_failure_mutex;
  std::string first_failure;
  auto note_failure = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(first_failure_mutex);
    if (first_failure.empty()) first_failure = what;
  };
  std::atomic<std::int64_t> publish_done_ns{0};
  std::vector<std::thread> publishers;
  for (std::uint64_t p = 0; p < s.publishers; ++p) {
    ClientRef c = make_client();
    publishers.emplace_back([&, c, p]() mutable {
      std::uint64_t begin = s.messages * p / s.publishers,
                    end = s.messages * (p + 1) / s.publishers;
      // Paced (--rate): message k of this publisher is due at start + k / (rate / P). Each
      // carries its due time, so a late send (a full window, a slow broker) counts in its
      // latency instead of being hidden (no coordinated omission).
      Pacer pacer(start, s.rate / static_cast<double>(s.publishers));
      if (mode != BenchMode::request) {
        WindowedPublisher publisher(c, s.topic, std::chrono::seconds(60), s.window);
        if (mode == BenchMode::publish) {
          publisher.on_complete([&](SteadyClock::time_point issued, std::size_t count, bool ok) {
            if (ok)
              latencies.record(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(issued.time_since_epoch())
                      .count());
            if ((confirmed += count) == target)
              finished.store(SteadyClock::now().time_since_epoch().count());
          });
        }
        if (s.batch > 1) {
          std::vector<std::string> batch;
          batch.reserve(s.batch);
          SteadyClock::time_point first_due{};
          for (std::uint64_t i = begin; i < end; ++i) {
            const auto due = pacer.wait(i - begin);
            if (batch.empty()) first_due = due;
            batch.push_back(bench_payload(i, s.size, filler, stamp_of(due)));
            if (batch.size() == s.batch || i + 1 == end) {
              publisher.publish_batch(std::exchange(batch, {}),
                                      pacer.paced() ? first_due : SteadyClock::time_point{});
              batch.reserve(s.batch);
            }
          }
        } else {
          for (std::uint64_t i = begin; i < end; ++i) {
            const auto due = pacer.wait(i - begin);
            publisher.publish(bench_payload(i, s.size, filler, stamp_of(due)),
                              pacer.paced() ? due : SteadyClock::time_point{});
          }
        }
        if (const auto failed = publisher.finish()) {
          publish_failures += failed;
          note_failure(publisher.first_error());
        }
      } else {
        WindowedPublisher requester(c, s.topic, std::chrono::seconds(60), s.window);
        for (std::uint64_t i = begin; i < end; ++i) {
          const auto due = pacer.wait(i - begin);
          requester.request(bench_payload(i, s.size, filler, stamp_of(due)),
                            [&](const Reply& reply) {
                              if (!reply.ec) latencies.record(sent_at(reply.payload));
                              if (++received == target)
                                finished.store(SteadyClock::now().time_since_epoch().count());
                            });
        }
        if (const auto failed = requester.finish()) {
          publish_failures += failed;
          note_failure(requester.first_error());
        }
      }
      std::int64_t t = now_ns();
      std::int64_t prev = publish_done_ns.load();
      while (t > prev && !publish_done_ns.compare_exchange_weak(prev, t)) {
      }
    });
  }

  // Progress once a second until everything arrived (or completed), every publisher failed
  // it, or timeout.
  auto done_count = [&] { return mode == BenchMode::publish ? confirmed.load() : received.load(); };
  auto last_print = SteadyClock::now();
  std::uint64_t last_count = 0;
  bool timed_out = false;
  while (done_count() < target) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling for the progress line
    if (SteadyClock::now() - start > s.timeout) {
      timed_out = true;
      break;
    }
    // Failed publishes never arrive: stop once everything that can arrive did.
    if (mode != BenchMode::publish && publish_failures.load() > 0 &&
        received.load() + publish_failures.load() * copies >= target)
      break;
    if (s.progress && SteadyClock::now() - last_print >= std::chrono::seconds(1)) {
      auto count = done_count();
      std::fprintf(stderr, "  %llu/%llu %s, %.0f msgs/s\n", static_cast<unsigned long long>(count),
                   static_cast<unsigned long long>(target),
                   mode == BenchMode::publish ? "completed" : "received",
                   static_cast<double>(count - last_count) /
                       std::chrono::duration<double>(SteadyClock::now() - last_print).count());
      last_print = SteadyClock::now();
      last_count = count;
    }
  }
  // Until the last message arrived (or completed), not until this loop noticed it.
  const auto end = finished.load() ? SteadyClock::time_point(SteadyClock::duration(finished.load()))
                                   : SteadyClock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  for (auto& t : publishers) t.join();
  const double cpu = bench::cpu_seconds() - cpu_start;
  const std::uint64_t allocations = allocations_so_far() - allocations_start;
  const double publish_seconds =
      publish_done_ns.load() > 0
          ? (publish_done_ns.load() -
             std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
                 .count()) /
                1e9
          : seconds;
  const std::uint64_t got = done_count();
  const std::uint64_t published = mode == BenchMode::consume ? 0 : s.messages;
  const std::uint64_t delivered = delivering ? received.load() : 0;
  const double rate = got / seconds;
  const double mb = rate * static_cast<double>(s.size) / (1024.0 * 1024.0);
  const std::size_t latency_samples = latencies.count();
  const char* latency_kind = mode == BenchMode::publish   ? "publish to completion"
                             : mode == BenchMode::request ? "round trip"
                                                          : "publish to receive";
  const double per_message = got ? 1.0 / static_cast<double>(got) : 0.0;
  for (auto& c : run_clients) c.close(std::chrono::seconds(5));
  for (auto& c : run_clients) c.close_sync(std::chrono::seconds(5));

  BenchResult result;
  result.scheme = probe.scheme();
  result.mode = mode;
  result.publish_confirmed = caps.publish_confirmed;
  result.measured = got;
  result.published = published;
  result.delivered = delivered;
  result.failures = publish_failures.load();
  result.first_failure = first_failure;
  result.timed_out = timed_out;
  result.seconds = seconds;
  result.publish_seconds = publish_seconds;
  result.msgs_per_sec = rate;
  result.mb_per_sec = mb;
  result.cpu_seconds = cpu;
  result.cpu_us_per_msg = cpu * 1e6 * per_message;
  result.allocations = allocations;
  result.allocs_per_msg = static_cast<double>(allocations) * per_message;
  result.latency_kind = latency_kind;
  result.latency_samples = latency_samples;
  for (double p : {50.0, 90.0, 99.0, 99.9, 99.99, 100.0})
    result.latency_us.emplace_back(p, latencies.percentile(p / 100.0));
  return result;
}

}  // namespace polybus::cli
