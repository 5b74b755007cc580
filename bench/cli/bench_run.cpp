// SPDX-License-Identifier: Apache-2.0
#include "bench_run.hpp"

#include <algorithm>
#include <atomic>
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
// `stamp_ns`: the send time it carries (a paced run's scheduled time; else now); none: the
// filler alone (--no-latency).
std::string bench_payload(std::uint64_t seq, std::size_t size, const std::string& filler,
                          std::optional<std::int64_t> stamp_ns) {
  if (!stamp_ns) return std::string(filler, 0, size);
  char head[bench::kLongestStamp];
  const std::size_t head_size = bench::format_stamp(head, seq, *stamp_ns);
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

std::optional<std::int64_t> stamp_of(std::optional<SteadyClock::time_point> t) {
  if (!t) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t->time_since_epoch()).count();
}

// Paces one publisher at `rate` messages per second from `start`; unpaced when rate is 0.
// Untimed (--no-latency) and unpaced, it reads no clock.
class Pacer {
 public:
  Pacer(SteadyClock::time_point start, double rate, bool timed)
      : start_(start), rate_(rate), timed_(timed) {}
  bool paced() const { return rate_ > 0; }
  // Waits until message k is due and returns when it was due (now, unpaced; nothing, unpaced and
  // untimed).
  std::optional<SteadyClock::time_point> wait(std::uint64_t k) const {
    if (!paced()) return timed_ ? std::optional(SteadyClock::now()) : std::nullopt;
    const auto due = start_ + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(static_cast<double>(k) / rate_));
    std::this_thread::sleep_until(due);
    return due;
  }

 private:
  SteadyClock::time_point start_;
  double rate_;
  bool timed_;
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

namespace {

// One run of `polybus bench` against one URL: its clients, its subscribers, its publishers (each
// on a thread of its own), the wait for the last message, and what it measured.
class BenchRun {
 public:
  BenchRun(const BenchSettings& s, BenchClients& registry)
      : s_(s), registry_(registry), filler_(bench_filler(s.size)) {}
  BenchRun(const BenchRun&) = delete;
  BenchRun& operator=(const BenchRun&) = delete;
  ~BenchRun() {
    for (auto& t : publishers_)
      if (t.joinable()) t.join();
  }

  BenchResult run();

 private:
  ClientRef make_client();
  // The mode the scheme and the settings make, or UsageError when they do not fit.
  void choose_mode();
  void start_clock();
  void subscribe_all();
  void start_publishers();
  void publish_share(ClientRef client, std::uint64_t p);
  void publish_range(WindowedPublisher& publisher, const Pacer& pacer, std::uint64_t begin,
                     std::uint64_t end);
  void request_range(WindowedPublisher& requester, const Pacer& pacer, std::uint64_t begin,
                     std::uint64_t end);
  // The send time a payload carries: when it was due; none with --no-latency.
  std::optional<std::int64_t> stamp(std::optional<SteadyClock::time_point> due) const {
    return s_.latency ? stamp_of(due) : std::nullopt;
  }
  void note_failures(const WindowedPublisher& publisher, std::size_t failed);
  void arrived() {
    if (++received_ == target_) finished_.store(SteadyClock::now().time_since_epoch().count());
  }
  std::uint64_t done_count() const {
    return mode_ == BenchMode::publish ? confirmed_.load() : received_.load();
  }
  // Progress once a second until everything arrived (or completed), every publisher failed it,
  // or the timeout; true when the timeout ended it.
  bool wait_for_the_end();
  BenchResult measure(bool timed_out);

  const BenchSettings& s_;
  BenchClients& registry_;
  const std::string filler_;
  std::vector<ClientRef> run_clients_;  // the registry owns them (--metrics reports them after)
  ClientRef probe_;
  Capabilities caps_;
  BenchMode mode_ = BenchMode::pubsub;
  bool delivering_ = false;
  std::uint64_t copies_ = 1, target_ = 0;
  std::optional<LatencyLog> latencies_;
  std::atomic<SteadyClock::rep> finished_{0};  // when the count reached target_
  std::atomic<std::uint64_t> received_{0}, confirmed_{0}, publish_failures_{0};
  std::atomic<std::int64_t> publish_done_ns_{0};
  // The first failure's words: a run that fails says why, not only how often.
  std::mutex first_failure_mutex_;
  std::string first_failure_;
  std::vector<Subscription> subs_;
  std::vector<std::thread> publishers_;
  double cpu_start_ = 0;
  std::uint64_t allocations_start_ = 0;
  SteadyClock::time_point start_;
};

ClientRef BenchRun::make_client() {
  Client client = polybus::connect(s_.url);
  ClientRef ref = client;
  run_clients_.push_back(ref);
  std::lock_guard<std::mutex> lock(registry_.mutex);
  registry_.all.push_back(std::move(client));
  return ref;
}

void BenchRun::choose_mode() {
  probe_ = make_client();
  caps_ = probe_.capabilities();
  const bool pubsub = caps_.publish && caps_.subscribe;
  const std::string scheme = probe_.scheme();
  if (s_.batch > 1 && !caps_.batch_publish)
    throw UsageError(scheme + " has no batch publish: --batch needs it");
  if (!pubsub && !caps_.request_reply)
    throw UsageError(scheme + " can neither publish/subscribe nor request/reply");
  if (s_.requests && !caps_.request_reply)
    throw UsageError(scheme +
                     " has no request/reply: --requests needs it (NSQ and Figg: "
                     "envelope=cloudevents in the URL)");
  mode_ = !pubsub || s_.requests ? BenchMode::request
          : s_.subscribers == 0  ? BenchMode::publish
          : s_.publishers == 0   ? BenchMode::consume
                                 : BenchMode::pubsub;
  if (mode_ == BenchMode::request && (s_.publishers == 0 || s_.subscribers == 0))
    throw UsageError(scheme + " only does request/reply: it needs a requester and a responder");
  if (s_.group && !caps_.consumer_groups)
    throw UsageError(scheme + " has no consumer groups: --group needs them");
  if (s_.from && !caps_.replay_from_offset)
    throw UsageError(scheme + " cannot replay from an offset: --from needs it");
  delivering_ = mode_ == BenchMode::pubsub || mode_ == BenchMode::consume;
  // Every subscriber gets every message unless they share a group.
  copies_ = delivering_ && !caps_.consumer_groups ? s_.subscribers : 1;
  target_ = s_.messages * copies_;
  latencies_.emplace(target_);
}

void BenchRun::start_clock() {
  cpu_start_ = bench::cpu_seconds();
  allocations_start_ = allocations_so_far();
  start_ = SteadyClock::now();
}

void BenchRun::subscribe_all() {
  const std::string group =
      s_.group.value_or("bench-" + std::to_string(std::random_device{}() % 1000000));
  for (std::uint64_t i = 0; i < s_.subscribers; ++i) {
    ClientRef c = i == 0 ? probe_ : make_client();
    SubscribeOptions options;
    options.max_in_flight = static_cast<std::uint32_t>(std::min<std::uint64_t>(s_.window, 2500));
    options.concurrency = static_cast<std::uint32_t>(s_.concurrency);
    options.from_offset = s_.from;
    options.middleware = bench_middleware(s_.middleware);
    if (mode_ == BenchMode::request) {
      subs_.push_back(
          c.serve(s_.topic, options, [](Message& m) { return std::string(m.payload()); }));
      continue;
    }
    if (caps_.consumer_groups) options.group = group;
    auto take = [this](Message& m) {
      if (s_.latency) latencies_->record(sent_at(m.payload()));
      arrived();
    };
    if (s_.batch_consume) {
      options.max_in_flight = std::max<std::uint32_t>(options.max_in_flight,
                                                      static_cast<std::uint32_t>(s_.batch_consume));
      subs_.push_back(c.subscribe_batch(
          s_.topic, options,
          BatchOptions{static_cast<std::uint32_t>(s_.batch_consume), s_.batch_wait},
          [take](Batch& batch) {
            for (Message& m : batch) take(m);
          }));
    } else {
      subs_.push_back(c.subscribe(s_.topic, options, take));
    }
  }
  for (auto& sub : subs_)
    if (auto ec = sub.wait_ready(std::chrono::seconds(30)))
      throw std::runtime_error("subscription failed: " + ec.message());
}

void BenchRun::start_publishers() {
  for (std::uint64_t p = 0; p < s_.publishers; ++p) {
    ClientRef c = make_client();
    publishers_.emplace_back([this, c, p] { publish_share(c, p); });
  }
}

// Publisher p's share of the messages. Paced (--rate): message k of this publisher is due at
// start + k / (rate / P). Each carries its due time, so a late send (a full window, a slow
// broker) counts in its latency instead of being hidden (no coordinated omission).
void BenchRun::publish_share(ClientRef client, std::uint64_t p) {
  const std::uint64_t begin = s_.messages * p / s_.publishers,
                      end = s_.messages * (p + 1) / s_.publishers;
  const Pacer pacer(start_, s_.rate / static_cast<double>(s_.publishers), s_.latency);
  WindowedPublisher publisher(client, s_.topic, std::chrono::seconds(60), s_.window);
  if (mode_ == BenchMode::request)
    request_range(publisher, pacer, begin, end);
  else
    publish_range(publisher, pacer, begin, end);
  note_failures(publisher, publisher.finish());
  const std::int64_t t = now_ns();
  std::int64_t prev = publish_done_ns_.load();
  while (t > prev && !publish_done_ns_.compare_exchange_weak(prev, t)) {
  }
}

void BenchRun::publish_range(WindowedPublisher& publisher, const Pacer& pacer, std::uint64_t begin,
                             std::uint64_t end) {
  if (mode_ == BenchMode::publish) {
    publisher.on_complete([this](SteadyClock::time_point issued, std::size_t count, bool ok) {
      if (ok && s_.latency)
        latencies_->record(
            std::chrono::duration_cast<std::chrono::nanoseconds>(issued.time_since_epoch())
                .count());
      if ((confirmed_ += count) == target_)
        finished_.store(SteadyClock::now().time_since_epoch().count());
    });
  }
  if (s_.batch <= 1) {
    for (std::uint64_t i = begin; i < end; ++i) {
      const auto due = pacer.wait(i - begin);
      publisher.publish(bench_payload(i, s_.size, filler_, stamp(due)),
                        pacer.paced() ? *due : SteadyClock::time_point{});
    }
    return;
  }
  std::vector<std::string> batch;
  batch.reserve(s_.batch);
  SteadyClock::time_point first_due{};
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto due = pacer.wait(i - begin);
    if (batch.empty()) first_due = due.value_or(SteadyClock::time_point{});
    batch.push_back(bench_payload(i, s_.size, filler_, stamp(due)));
    if (batch.size() == s_.batch || i + 1 == end) {
      publisher.publish_batch(std::exchange(batch, {}),
                              pacer.paced() ? first_due : SteadyClock::time_point{});
      batch.reserve(s_.batch);
    }
  }
}

void BenchRun::request_range(WindowedPublisher& requester, const Pacer& pacer, std::uint64_t begin,
                             std::uint64_t end) {
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto due = pacer.wait(i - begin);
    requester.request(bench_payload(i, s_.size, filler_, stamp(due)), [this](const Reply& reply) {
      if (!reply.ec && s_.latency) latencies_->record(sent_at(reply.payload));
      arrived();
    });
  }
}

void BenchRun::note_failures(const WindowedPublisher& publisher, std::size_t failed) {
  if (!failed) return;
  publish_failures_ += failed;
  std::lock_guard<std::mutex> lock(first_failure_mutex_);
  if (first_failure_.empty()) first_failure_ = publisher.first_error();
}

bool BenchRun::wait_for_the_end() {
  auto last_print = SteadyClock::now();
  std::uint64_t last_count = 0;
  while (done_count() < target_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling for the progress line
    if (SteadyClock::now() - start_ > s_.timeout) return true;
    // Failed publishes never arrive: stop once everything that can arrive did.
    if (mode_ != BenchMode::publish && publish_failures_.load() > 0 &&
        received_.load() + publish_failures_.load() * copies_ >= target_)
      return false;
    if (s_.progress && SteadyClock::now() - last_print >= std::chrono::seconds(1)) {
      auto count = done_count();
      std::fprintf(stderr, "  %llu/%llu %s, %.0f msgs/s\n", static_cast<unsigned long long>(count),
                   static_cast<unsigned long long>(target_),
                   mode_ == BenchMode::publish ? "completed" : "received",
                   static_cast<double>(count - last_count) /
                       std::chrono::duration<double>(SteadyClock::now() - last_print).count());
      last_print = SteadyClock::now();
      last_count = count;
    }
  }
  return false;
}

BenchResult BenchRun::measure(bool timed_out) {
  // Until the last message arrived (or completed), not until the wait noticed it.
  const auto end = finished_.load()
                       ? SteadyClock::time_point(SteadyClock::duration(finished_.load()))
                       : SteadyClock::now();
  const double seconds = std::chrono::duration<double>(end - start_).count();
  for (auto& t : publishers_) t.join();
  const double cpu = bench::cpu_seconds() - cpu_start_;
  const std::uint64_t allocations = allocations_so_far() - allocations_start_;
  const std::int64_t start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count();
  const std::uint64_t got = done_count();
  const double per_message = got ? 1.0 / static_cast<double>(got) : 0.0;
  for (auto& c : run_clients_) c.close(std::chrono::seconds(5));
  for (auto& c : run_clients_) c.close_sync(std::chrono::seconds(5));

  BenchResult result;
  result.scheme = probe_.scheme();
  result.mode = mode_;
  result.publish_confirmed = caps_.publish_confirmed;
  result.measured = got;
  result.published = mode_ == BenchMode::consume ? 0 : s_.messages;
  result.delivered = delivering_ ? received_.load() : 0;
  result.failures = publish_failures_.load();
  result.first_failure = first_failure_;
  result.timed_out = timed_out;
  result.seconds = seconds;
  result.publish_seconds =
      publish_done_ns_.load() > 0 ? (publish_done_ns_.load() - start_ns) / 1e9 : seconds;
  result.msgs_per_sec = got / seconds;
  result.mb_per_sec = result.msgs_per_sec * static_cast<double>(s_.size) / (1024.0 * 1024.0);
  result.cpu_seconds = cpu;
  result.cpu_us_per_msg = cpu * 1e6 * per_message;
  result.allocations = allocations;
  result.allocs_per_msg = static_cast<double>(allocations) * per_message;
  result.latency_kind = mode_ == BenchMode::publish   ? "publish to completion"
                        : mode_ == BenchMode::request ? "round trip"
                                                      : "publish to receive";
  result.latency_samples = latencies_->count();
  for (double p : {50.0, 90.0, 99.0, 99.9, 99.99, 100.0})
    result.latency_us.emplace_back(p, latencies_->percentile(p / 100.0));
  return result;
}

BenchResult BenchRun::run() {
  choose_mode();
  // Consume only: the subscriptions are the work, so the clock runs from before them.
  if (mode_ == BenchMode::consume) start_clock();
  subscribe_all();
  if (mode_ != BenchMode::consume) start_clock();
  start_publishers();
  const bool timed_out = wait_for_the_end();
  return measure(timed_out);
}

}  // namespace

BenchResult run_bench_once(const BenchSettings& s, BenchClients& registry) {
  return BenchRun(s, registry).run();
}

}  // namespace polybus::cli
