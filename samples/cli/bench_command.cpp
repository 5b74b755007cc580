// bench: publish N messages from P publishers and consume them with S subscribers (or, for
// request/reply-only schemes, N round trips to S responders), then report throughput, latency
// and the CPU time of this process. The last line is one JSON object.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "allocation_counter.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "metrics_endpoint.hpp"
#include "polybus/polybus.hpp"
#include "windowed_publisher.hpp"

namespace polybus::cli {
namespace {

const char* kBenchUsage = R"(usage: polybus bench URL [--topic T] [--messages N] [--size B]
                           [--publishers P] [--subscribers S] [--window W] [--batch K]
                           [--concurrency C] [--group G] [--from OFFSET] [--timeout S]
                           [--metrics HOST:PORT]
Publishes N messages of B bytes (default 100000 x 200) from P publishers (default 1), consumes
them with S subscribers (default 1; one consumer group where the scheme has them) and reports
msgs/s, MB/s, publish-to-receive latency p50/p99/p99.9, this process's CPU time and its heap
allocations (operator new) per message. Schemes that only do request/reply run N round trips to
S responders instead.
  --subscribers 0   publish only: throughput of completed publishes, latency from publish to
                    its completion (broker-confirmed where the scheme confirms).
  --publishers 0    consume only: drains N messages that are already there (another process's,
                    or an earlier --subscribers 0 run's: same --topic, and --group G on brokers
                    with groups, --from OFFSET on Figg); payloads polybus did not write are
                    counted but give no latency.
--window W keeps at most W publishes in flight per publisher (default 1000). --batch K
publishes K messages per publish_batch (NSQ's MPUB). --concurrency C runs C handlers at once per
subscriber or responder (MemoDB: C workers on its socket; default: the URL's
handler_concurrency option, 1 unless set). --metrics HOST:PORT serves the metrics of every
client of the run at http://HOST:PORT/metrics while it runs. Ends with one JSON line.
)";

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
std::string bench_payload(std::uint64_t seq, std::size_t size, const std::string& filler) {
  char head[64];
  char* end = std::to_chars(head, head + 32, seq).ptr;
  *end++ = ' ';
  end = std::to_chars(end, end + 24, now_ns()).ptr;
  *end++ = ' ';
  const auto head_size = static_cast<std::size_t>(end - head);
  std::string payload;
  payload.reserve(std::max(size, head_size));
  payload.append(head, head_size);
  if (size > head_size) payload.append(filler, head_size, size - head_size);
  return payload;
}

// The send time of a payload bench_payload made; nothing for any other payload.
std::optional<std::int64_t> sent_at(std::string_view payload) {
  const auto first = payload.find(' ');
  if (first == 0 || first == std::string_view::npos) return std::nullopt;
  const auto second = payload.find(' ', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  std::uint64_t seq = 0;
  auto [seq_end, seq_ec] = std::from_chars(payload.data(), payload.data() + first, seq);
  if (seq_ec != std::errc() || seq_end != payload.data() + first) return std::nullopt;
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(payload.data() + first + 1, payload.data() + second, value);
  if (ec != std::errc() || end != payload.data() + second || value <= 0) return std::nullopt;
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
  void record(std::optional<std::int64_t> sent_ns) {
    if (sent_ns) record(*sent_ns);
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
  std::optional<std::string> group;
  std::optional<std::uint64_t> from;
};

// What one run measures: deliveries (pubsub, consume), publish completions (publish) or round
// trips (request).
enum class Mode { pubsub, publish, consume, request };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::pubsub: return "pubsub";
    case Mode::publish: return "publish";
    case Mode::consume: return "consume";
    case Mode::request: return "request";
  }
  return "?";
}

}  // namespace

int run_bench(const Argv& argv) {
  Args args(argv, {"topic", "messages", "size", "publishers", "subscribers", "window", "batch",
                   "concurrency", "timeout", "group", "from", "metrics"});
  if (args.help()) return std::cout << kBenchUsage, 0;
  Settings s;
  s.url = args.positional(0, "URL");
  if (args.positional().size() > 1)
    throw UsageError("unexpected argument '" + args.positional()[1] + "'");
  s.topic = args.value("topic").value_or("bench");
  s.messages = args.number("messages", 100000, 1, 100'000'000);
  s.size = args.number("size", 200, 1, 64 << 20);
  s.publishers = args.number("publishers", 1, 0, 64);
  s.subscribers = args.number("subscribers", 1, 0, 64);
  s.window = args.number("window", 1000, 1, 1'000'000);
  s.batch = args.number("batch", 1, 1, 100'000);
  s.concurrency = args.number("concurrency", 0, 0, 256);
  s.timeout = std::chrono::seconds(args.number("timeout", 600, 1, 86400));
  s.group = args.value("group");
  if (args.has("from")) s.from = args.number("from", 0, 0, UINT64_MAX);
  if (s.publishers == 0 && s.subscribers == 0)
    throw UsageError("--publishers 0 and --subscribers 0: nothing to measure");

  std::mutex clients_mutex;  // the metrics endpoint reads the list while clients are added
  std::vector<Client> clients;
  auto make_client = [&] {
    Client client = polybus::connect(s.url);
    std::lock_guard<std::mutex> lock(clients_mutex);
    clients.push_back(client);
    return client;
  };
  auto endpoint = metrics_endpoint_if_asked(args, [&] {
    std::lock_guard<std::mutex> lock(clients_mutex);
    std::vector<metrics::ClientMetrics> all;
    for (const auto& client : clients) all.push_back(client.metrics());
    return all;
  });
  Client probe = make_client();
  const Capabilities caps = probe.capabilities();
  const bool pubsub = caps.publish && caps.subscribe;
  if (s.batch > 1 && !caps.batch_publish)
    throw UsageError(probe.scheme() + " has no batch publish: --batch needs it");
  if (!pubsub && !caps.request_reply)
    throw UsageError(probe.scheme() + " can neither publish/subscribe nor request/reply");
  const Mode mode = !pubsub                 ? Mode::request
                    : s.subscribers == 0    ? Mode::publish
                    : s.publishers == 0     ? Mode::consume
                                            : Mode::pubsub;
  if (mode == Mode::request && (s.publishers == 0 || s.subscribers == 0))
    throw UsageError(probe.scheme() +
                     " only does request/reply: it needs a requester and a responder");
  if (s.group && !caps.consumer_groups)
    throw UsageError(probe.scheme() + " has no consumer groups: --group needs them");
  if (s.from && !caps.replay_from_offset)
    throw UsageError(probe.scheme() + " cannot replay from an offset: --from needs it");
  const bool delivering = mode == Mode::pubsub || mode == Mode::consume;
  // Every subscriber gets every message unless they share a group.
  const std::uint64_t copies = delivering && !caps.consumer_groups ? s.subscribers : 1;
  const std::uint64_t target = s.messages * copies;

  LatencyLog latencies(target);
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
    cpu_start = cpu_seconds();
    allocations_start = allocations_so_far();
    start = SteadyClock::now();
  };
  // Consume only: the subscriptions are the work, so the clock runs from before them.
  if (mode == Mode::consume) start_clock();
  for (std::uint64_t i = 0; i < s.subscribers; ++i) {
    Client c = i == 0 ? probe : make_client();
    SubscribeOptions options;
    options.max_in_flight = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.window, 2500));
    options.concurrency = static_cast<std::uint32_t>(s.concurrency);
    options.from_offset = s.from;
    if (mode == Mode::request) {
      subs.push_back(c.serve(
          s.topic, [](Message& m) { return std::string(m.payload()); }, options));
    } else {
      if (caps.consumer_groups) options.group = group;
      subs.push_back(c.subscribe(s.topic, options, [&](Message& m) {
        latencies.record(sent_at(m.payload()));
        ++received;
      }));
    }
  }
  for (auto& sub : subs)
    if (auto ec = sub.wait_ready(std::chrono::seconds(30)))
      throw std::runtime_error("subscription failed: " + ec.message());

  if (mode != Mode::consume) start_clock();
  std::atomic<std::uint64_t> publish_failures{0};
  std::atomic<std::int64_t> publish_done_ns{0};
  std::vector<std::thread> publishers;
  for (std::uint64_t p = 0; p < s.publishers; ++p) {
    Client c = make_client();
    publishers.emplace_back([&, c, p]() mutable {
      std::uint64_t begin = s.messages * p / s.publishers,
                    end = s.messages * (p + 1) / s.publishers;
      if (mode != Mode::request) {
        WindowedPublisher publisher(c, s.topic, std::chrono::seconds(60), s.window);
        if (mode == Mode::publish) {
          publisher.on_complete(
              [&](SteadyClock::time_point issued, std::size_t count, bool ok) {
                if (ok)
                  latencies.record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       issued.time_since_epoch())
                                       .count());
                confirmed += count;
              });
        }
        if (s.batch > 1) {
          std::vector<std::string> batch;
          batch.reserve(s.batch);
          for (std::uint64_t i = begin; i < end; ++i) {
            batch.push_back(bench_payload(i, s.size, filler));
            if (batch.size() == s.batch || i + 1 == end) {
              publisher.publish_batch(std::exchange(batch, {}));
              batch.reserve(s.batch);
            }
          }
        } else {
          for (std::uint64_t i = begin; i < end; ++i) publisher.publish(bench_payload(i, s.size, filler));
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
              s.topic, bench_payload(i, s.size, filler),
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

  // Progress once a second until everything arrived (or completed), every publisher failed
  // it, or timeout.
  auto done_count = [&] { return mode == Mode::publish ? confirmed.load() : received.load(); };
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
    if (mode != Mode::publish && publish_failures.load() > 0 &&
        received.load() + publish_failures.load() * copies >= target)
      break;
    if (SteadyClock::now() - last_print >= std::chrono::seconds(1)) {
      auto count = done_count();
      std::fprintf(stderr, "  %llu/%llu %s, %.0f msgs/s\n", static_cast<unsigned long long>(count),
                   static_cast<unsigned long long>(target),
                   mode == Mode::publish ? "completed" : "received",
                   static_cast<double>(count - last_count) /
                       std::chrono::duration<double>(SteadyClock::now() - last_print).count());
      last_print = SteadyClock::now();
      last_count = count;
    }
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (auto& t : publishers) t.join();
  const double cpu = cpu_seconds() - cpu_start;
  const std::uint64_t allocations = allocations_so_far() - allocations_start;
  const double publish_seconds =
      publish_done_ns.load() > 0
          ? (publish_done_ns.load() -
             std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
                 .count()) /
                1e9
          : seconds;
  const std::uint64_t got = done_count();
  const std::uint64_t published = mode == Mode::consume ? 0 : s.messages;
  const std::uint64_t delivered = delivering ? received.load() : 0;
  const double rate = got / seconds;
  const double mb = rate * static_cast<double>(s.size) / (1024.0 * 1024.0);
  const std::size_t latency_samples = latencies.count();
  auto p50 = latencies.percentile(0.50), p99 = latencies.percentile(0.99),
       p999 = latencies.percentile(0.999);
  const char* latency_kind = mode == Mode::publish   ? "publish to completion"
                             : mode == Mode::request ? "round trip"
                                                     : "publish to receive";
  const double per_message = got ? 1.0 / static_cast<double>(got) : 0.0;
  for (auto& c : clients) c.close(std::chrono::seconds(5));
  for (auto& c : clients) c.close_sync(std::chrono::seconds(5));

  std::printf("%s %s: %llu published, %llu delivered, %llu B each, %llu publisher(s), %llu %s\n",
              probe.scheme().c_str(), mode_name(mode), static_cast<unsigned long long>(published),
              static_cast<unsigned long long>(delivered), static_cast<unsigned long long>(s.size),
              static_cast<unsigned long long>(s.publishers),
              static_cast<unsigned long long>(s.subscribers),
              mode == Mode::request ? "responder(s)" : "subscriber(s)");
  std::printf("  throughput: %.0f msgs/s, %.2f MB/s over %.3f s", rate, mb, seconds);
  if (mode == Mode::pubsub)
    std::printf(" (publishing took %.3f s: %.0f msgs/s)", publish_seconds,
                s.messages / publish_seconds);
  std::printf("\n");
  if (latency_samples)
    std::printf("  latency (%s): p50 %llu us, p99 %llu us, p99.9 %llu us\n", latency_kind,
                static_cast<unsigned long long>(p50), static_cast<unsigned long long>(p99),
                static_cast<unsigned long long>(p999));
  else
    std::printf("  latency: none (no payload carried a bench send time)\n");
  std::printf("  cpu: %.3f s in this process, %.2f us per message; %.2f allocations per message\n",
              cpu, cpu * 1e6 * per_message, static_cast<double>(allocations) * per_message);
  if (publish_failures.load() || timed_out)
    std::printf("  failures: %llu publish/request error(s)%s\n",
                static_cast<unsigned long long>(publish_failures.load()),
                timed_out ? ", timed out before every message arrived" : "");
  std::printf(
      "{\"scheme\":\"%s\",\"mode\":\"%s\",\"messages\":%llu,\"published\":%llu,\"delivered\":%llu,"
      "\"size\":%llu,\"publishers\":%llu,\"subscribers\":%llu,\"concurrency\":%llu,"
      "\"seconds\":%.6f,\"msgs_per_sec\":%.1f,\"mb_per_sec\":%.3f,\"latency\":\"%s\","
      "\"latency_samples\":%llu,\"p50_us\":%llu,\"p99_us\":%llu,\"p999_us\":%llu,"
      "\"cpu_seconds\":%.6f,\"cpu_us_per_msg\":%.3f,\"allocations\":%llu,"
      "\"allocs_per_msg\":%.3f,\"publish_seconds\":%.6f,\"failures\":%llu}\n",
      probe.scheme().c_str(), mode_name(mode), static_cast<unsigned long long>(got),
      static_cast<unsigned long long>(published), static_cast<unsigned long long>(delivered),
      static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.publishers),
      static_cast<unsigned long long>(s.subscribers),
      static_cast<unsigned long long>(s.concurrency), seconds, rate, mb, latency_kind,
      static_cast<unsigned long long>(latency_samples), static_cast<unsigned long long>(p50),
      static_cast<unsigned long long>(p99), static_cast<unsigned long long>(p999), cpu,
      cpu * 1e6 * per_message, static_cast<unsigned long long>(allocations),
      static_cast<double>(allocations) * per_message, publish_seconds,
      static_cast<unsigned long long>(publish_failures.load()));
  return publish_failures.load() || timed_out ? 1 : 0;
}

}  // namespace polybus::cli
