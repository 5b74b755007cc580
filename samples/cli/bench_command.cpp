// bench: publish N messages from P publishers and consume them with S subscribers (or, for
// request/reply-only schemes, N round trips to S responders), then report throughput, latency
// and the CPU time of this process. The last line is one JSON object.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <random>
#include <thread>
#include <utility>

#include "args.hpp"
#include "commands.hpp"
#include "polybus/polybus.hpp"
#include "windowed_publisher.hpp"

namespace polybus::cli {
namespace {

const char* kBenchUsage = R"(usage: polybus bench URL [--topic T] [--messages N] [--size B]
                           [--publishers P] [--subscribers S] [--window W] [--batch K]
                           [--concurrency C] [--timeout S]
Publishes N messages of B bytes (default 100000 x 200) from P publishers (default 1), consumes
them with S subscribers (default 1; one consumer group where the scheme has them) and reports
msgs/s, MB/s, publish-to-receive latency p50/p99/p99.9 and this process's CPU time. Schemes that
only do request/reply run N round trips to S responders instead. --batch K publishes K messages
per publish_batch (NSQ's MPUB). --concurrency C runs C handlers at once per subscriber or
responder (MemoDB: C workers on its socket; default: the URL's handler_concurrency option,
1 unless set). Ends with one JSON line.
)";

using SteadyClock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

// "<seq> <send time ns> <filler>", at least size bytes only when size allows the header.
std::string bench_payload(std::uint64_t seq, std::size_t size) {
  std::string payload = std::to_string(seq) + " " + std::to_string(now_ns()) + " ";
  while (payload.size() < size) payload.push_back(static_cast<char>('a' + payload.size() % 26));
  return payload;
}

std::int64_t sent_at(std::string_view payload) {
  auto first = payload.find(' ');
  if (first == std::string_view::npos) return 0;
  auto second = payload.find(' ', first + 1);
  std::int64_t value = 0;
  std::from_chars(payload.data() + first + 1, payload.data() + second, value);
  return value;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

class LatencyLog {
 public:
  explicit LatencyLog(std::size_t capacity) : micros_(capacity) {}
  void record(std::int64_t sent_ns) {
    auto i = next_.fetch_add(1);
    if (i < micros_.size())
      micros_[i] = static_cast<std::uint32_t>(std::max<std::int64_t>(0, now_ns() - sent_ns) / 1000);
  }
  std::size_t count() const { return std::min<std::size_t>(next_.load(), micros_.size()); }
  std::uint64_t percentile(double p) {
    std::size_t n = count();
    if (n == 0) return 0;
    std::size_t k = std::min(n - 1, static_cast<std::size_t>(p * n));
    std::nth_element(micros_.begin(), micros_.begin() + k, micros_.begin() + n);
    return micros_[k];
  }

 private:
  std::vector<std::uint32_t> micros_;
  std::atomic<std::size_t> next_{0};
};

struct Settings {
  std::string url, topic;
  std::uint64_t messages, size, publishers, subscribers, window, batch, concurrency;
  std::chrono::seconds timeout;
};

}  // namespace

int run_bench(const Argv& argv) {
  Args args(argv, {"topic", "messages", "size", "publishers", "subscribers", "window", "batch",
                   "concurrency", "timeout"});
  if (args.help()) return std::cout << kBenchUsage, 0;
  Settings s;
  s.url = args.positional(0, "URL");
  if (args.positional().size() > 1)
    throw UsageError("unexpected argument '" + args.positional()[1] + "'");
  s.topic = args.value("topic").value_or("bench");
  s.messages = args.number("messages", 100000, 1, 100'000'000);
  s.size = args.number("size", 200, 1, 64 << 20);
  s.publishers = args.number("publishers", 1, 1, 64);
  s.subscribers = args.number("subscribers", 1, 1, 64);
  s.window = args.number("window", 1000, 1, 1'000'000);
  s.batch = args.number("batch", 1, 1, 100'000);
  s.concurrency = args.number("concurrency", 0, 0, 256);
  s.timeout = std::chrono::seconds(args.number("timeout", 600, 1, 86400));

  std::vector<Client> clients;
  auto make_client = [&] {
    clients.push_back(polybus::connect(s.url));
    return clients.back();
  };
  Client probe = make_client();
  const Capabilities caps = probe.capabilities();
  const bool pubsub = caps.publish && caps.subscribe;
  if (s.batch > 1 && !caps.batch_publish)
    throw UsageError(probe.scheme() + " has no batch publish: --batch needs it");
  if (!pubsub && !caps.request_reply)
    throw UsageError(probe.scheme() + " can neither publish/subscribe nor request/reply");
  const std::uint64_t expected =
      pubsub && !caps.consumer_groups ? s.messages * s.subscribers : s.messages;

  LatencyLog latencies(expected);
  std::atomic<std::uint64_t> received{0};
  std::vector<Subscription> subs;
  std::string group = "bench-" + std::to_string(std::random_device{}() % 1000000);
  for (std::uint64_t i = 0; i < s.subscribers; ++i) {
    Client c = i == 0 ? probe : make_client();
    SubscribeOptions options;
    options.max_in_flight = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.window, 2500));
    options.concurrency = static_cast<std::uint32_t>(s.concurrency);
    if (pubsub) {
      if (caps.consumer_groups) options.group = group;
      subs.push_back(c.subscribe(s.topic, options, [&](Message& m) {
        latencies.record(sent_at(m.payload()));
        ++received;
      }));
    } else {
      subs.push_back(c.serve(
          s.topic, [](Message& m) { return std::string(m.payload()); }, options));
    }
  }
  for (auto& sub : subs)
    if (auto ec = sub.wait_ready(std::chrono::seconds(30)))
      throw std::runtime_error("subscription failed: " + ec.message());

  const double cpu_start = cpu_seconds();
  const auto start = SteadyClock::now();
  std::atomic<std::uint64_t> publish_failures{0};
  std::atomic<std::int64_t> publish_done_ns{0};
  std::vector<std::thread> publishers;
  for (std::uint64_t p = 0; p < s.publishers; ++p) {
    Client c = make_client();
    publishers.emplace_back([&, c, p]() mutable {
      std::uint64_t begin = s.messages * p / s.publishers,
                    end = s.messages * (p + 1) / s.publishers;
      if (pubsub) {
        WindowedPublisher publisher(c, s.topic, std::chrono::seconds(60), s.window);
        if (s.batch > 1) {
          std::vector<std::string> batch;
          for (std::uint64_t i = begin; i < end; ++i) {
            batch.push_back(bench_payload(i, s.size));
            if (batch.size() == s.batch || i + 1 == end)
              publisher.publish_batch(std::exchange(batch, {}));
          }
        } else {
          for (std::uint64_t i = begin; i < end; ++i) publisher.publish(bench_payload(i, s.size));
        }
        publish_failures += publisher.finish();
      } else {
        std::mutex mutex;
        std::condition_variable cv;
        std::uint64_t in_flight = 0;
        for (std::uint64_t i = begin; i < end; ++i) {
          std::unique_lock<std::mutex> lock(mutex);
          cv.wait(lock, [&] { return in_flight < s.window; });
          ++in_flight;
          lock.unlock();
          c.request(
              s.topic, bench_payload(i, s.size),
              [&](Reply reply) {
                if (reply.ec)
                  ++publish_failures;
                else
                  latencies.record(sent_at(reply.payload));
                ++received;
                std::lock_guard<std::mutex> guard(mutex);
                --in_flight;
                cv.notify_all();
              },
              std::chrono::seconds(60));
        }
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return in_flight == 0; });
      }
      std::int64_t t = now_ns();
      std::int64_t prev = publish_done_ns.load();
      while (t > prev && !publish_done_ns.compare_exchange_weak(prev, t)) {
      }
    });
  }

  // Progress once a second until everything arrived, every publisher failed it, or timeout.
  const std::uint64_t target = pubsub ? expected : s.messages;
  auto last_print = SteadyClock::now();
  std::uint64_t last_count = 0;
  bool timed_out = false;
  const std::uint64_t copies = pubsub && !caps.consumer_groups ? s.subscribers : 1;
  while (received.load() < target) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling for the progress line
    if (SteadyClock::now() - start > s.timeout) {
      timed_out = true;
      break;
    }
    // Failed publishes never arrive: stop once everything that can arrive did.
    if (publish_failures.load() > 0 && received.load() + publish_failures.load() * copies >= target)
      break;
    if (SteadyClock::now() - last_print >= std::chrono::seconds(1)) {
      auto count = received.load();
      std::fprintf(stderr, "  %llu/%llu received, %.0f msgs/s\n",
                   static_cast<unsigned long long>(count), static_cast<unsigned long long>(target),
                   static_cast<double>(count - last_count) /
                       std::chrono::duration<double>(SteadyClock::now() - last_print).count());
      last_print = SteadyClock::now();
      last_count = count;
    }
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (auto& t : publishers) t.join();
  const double cpu = cpu_seconds() - cpu_start;
  const double publish_seconds =
      publish_done_ns.load() > 0
          ? (publish_done_ns.load() -
             std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
                 .count()) /
                1e9
          : seconds;
  const std::uint64_t got = received.load();
  const double rate = got / seconds;
  const double mb = rate * static_cast<double>(s.size) / (1024.0 * 1024.0);
  auto p50 = latencies.percentile(0.50), p99 = latencies.percentile(0.99),
       p999 = latencies.percentile(0.999);
  for (auto& c : clients) c.close(std::chrono::seconds(5));
  for (auto& c : clients) c.close_sync(std::chrono::seconds(5));

  std::printf(
      "%s %s: %llu msgs of %llu B, %llu publisher(s), %llu %s\n", probe.scheme().c_str(),
      pubsub ? "publish/subscribe" : "request/reply", static_cast<unsigned long long>(got),
      static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.publishers),
      static_cast<unsigned long long>(s.subscribers), pubsub ? "subscriber(s)" : "responder(s)");
  std::printf(
      "  throughput: %.0f msgs/s, %.2f MB/s over %.3f s (publishing took %.3f s: %.0f msgs/s)\n",
      rate, mb, seconds, publish_seconds, s.messages / publish_seconds);
  std::printf("  latency: p50 %llu us, p99 %llu us, p99.9 %llu us\n",
              static_cast<unsigned long long>(p50), static_cast<unsigned long long>(p99),
              static_cast<unsigned long long>(p999));
  std::printf("  cpu: %.3f s in this process, %.2f us per message\n", cpu,
              got ? cpu * 1e6 / got : 0.0);
  if (publish_failures.load() || timed_out)
    std::printf("  failures: %llu publish/request error(s)%s\n",
                static_cast<unsigned long long>(publish_failures.load()),
                timed_out ? ", timed out before every message arrived" : "");
  std::printf(
      "{\"scheme\":\"%s\",\"mode\":\"%s\",\"messages\":%llu,\"size\":%llu,\"publishers\":%llu,"
      "\"subscribers\":%llu,\"concurrency\":%llu,\"seconds\":%.6f,\"msgs_per_sec\":%.1f,\"mb_per_"
      "sec\":%.3f,"
      "\"p50_us\":%llu,\"p99_us\":%llu,\"p999_us\":%llu,\"cpu_seconds\":%.6f,"
      "\"cpu_us_per_msg\":%.3f,\"publish_seconds\":%.6f,\"failures\":%llu}\n",
      probe.scheme().c_str(), pubsub ? "pubsub" : "request", static_cast<unsigned long long>(got),
      static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.publishers),
      static_cast<unsigned long long>(s.subscribers),
      static_cast<unsigned long long>(s.concurrency), seconds, rate, mb,
      static_cast<unsigned long long>(p50), static_cast<unsigned long long>(p99),
      static_cast<unsigned long long>(p999), cpu, got ? cpu * 1e6 / got : 0.0, publish_seconds,
      static_cast<unsigned long long>(publish_failures.load()));
  return publish_failures.load() || timed_out ? 1 : 0;
}

}  // namespace polybus::cli
