// SPDX-License-Identifier: Apache-2.0
#include "distributed_run.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <random>
#include <thread>

#include "bench/histogram_codec.hpp"
#include "bench/histogram_log.hpp"
#include "bench/payload_stamp.hpp"
#include "bench/rate_controller.hpp"
#include "bench/result_windows.hpp"
#include "polybus/text/text.hpp"
#include "worker_client.hpp"

namespace polybus::bench::coordinator {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A worker's histograms may be of any layout OMB reads (OMB's Java worker: 5 digits, up to 12 h,
// 2.7 million buckets); more than this many buckets is refused.
constexpr std::int32_t kMaxWorkerBuckets = 1 << 22;

struct Counters {
  std::uint64_t sent = 0, errors = 0, received = 0;
};

// What the workers measured, summed: a period's counters and histograms, or the cumulative
// histograms.
struct Merged {
  std::uint64_t sent = 0, errors = 0, bytes_sent = 0, received = 0, bytes_received = 0;
  std::uint64_t total_sent = 0, total_errors = 0, total_received = 0;
  // The ranges OMB's coordinator adds into: publish up to an hour here (OMB: 60 s), end to
  // end up to 12 h.
  HdrHistogram publish = HdrHistogram::for_latency_us(), delay = HdrHistogram::for_latency_us(),
               end_to_end = HdrHistogram(1, 43'200'000'000LL, 3);
};

rapidjson::Document parse(const std::string& body, const std::string& where) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (document.HasParseError() || !document.IsObject())
    throw std::runtime_error(where + ": the answer is not a JSON object");
  return document;
}

std::uint64_t counter(const rapidjson::Document& d, const char* key, const std::string& where) {
  const auto it = d.FindMember(key);
  if (it == d.MemberEnd() || it->value.IsNull()) return 0;  // missing: Jackson's default
  if (!it->value.IsUint64()) throw std::runtime_error(where + ": " + key + " is not a count");
  return it->value.GetUint64();
}

void add_histogram(HdrHistogram& into, const rapidjson::Document& d, const char* key,
                   const std::string& where) {
  const auto it = d.FindMember(key);
  if (it == d.MemberEnd() || it->value.IsNull()) return;
  if (!it->value.IsString()) throw std::runtime_error(where + ": " + key + " is not a histogram");
  try {
    into.add_values(decode_compressed_base64(
        std::string_view(it->value.GetString(), it->value.GetStringLength()), kMaxWorkerBuckets));
  } catch (const std::exception& e) {
    throw std::runtime_error(where + ": " + key + ": " + e.what());
  }
}

std::string random_letters(std::mt19937_64& random, int n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < n; ++i) out += kAlphabet[random() % (sizeof kAlphabet - 1)];
  return out;
}

template <typename... Values>
std::string format(const char* pattern, Values... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

class DistributedRun {
 public:
  DistributedRun(const Workload& w, const DistributedSettings& s) : w_(w), s_(s) {
    if (s.workers.size() < 2)
      throw std::runtime_error(
          "a distributed run needs two workers or more (OMB's rule: half "
          "produce, the rest consume)");
    for (const auto& url : s.workers)
      workers_.push_back(std::make_unique<WorkerClient>(url, s.call_timeout));
    // OMB's split: n/2 producing workers, the first ones; the rest consume.
    const std::size_t producing = s.workers.size() / 2;
    for (std::size_t i = 0; i < workers_.size(); ++i)
      (i < producing ? producers_ : consumers_).push_back(workers_[i].get());
    for (auto& w_ptr : workers_) all_.push_back(w_ptr.get());
  }
  // Every worker is told to stop, whatever ended the run.
  ~DistributedRun() {
    try {
      each(all_, [](WorkerClient& w) { w.post("/stop-all"); });
    } catch (const std::exception& e) {
      if (s_.progress) s_.progress(std::string("stopping the workers: ") + e.what());
    }
  }
  DistributedRun(const DistributedRun&) = delete;
  DistributedRun& operator=(const DistributedRun&) = delete;

  OmbResult run();

 private:
  bool stopped() const { return s_.stop && s_.stop->load(); }
  // Calls every worker of `group` at once (OMB calls a group in parallel) and rethrows the first
  // failure once all have answered.
  template <typename Fn>
  void each(const std::vector<WorkerClient*>& group, Fn fn) {
    std::vector<std::exception_ptr> failures(group.size());
    std::vector<std::thread> threads;
    try {
      for (std::size_t i = 0; i < group.size(); ++i)
        threads.emplace_back([&, i] {
          try {
            fn(*group[i]);
          } catch (...) {
            failures[i] = std::current_exception();
          }
        });
    } catch (...) {  // no thread to be had: those started end first
      for (auto& t : threads) t.join();
      throw;
    }
    for (auto& t : threads) t.join();
    for (auto& failure : failures)
      if (failure) std::rethrow_exception(failure);
  }
  Counters counters();
  Merged gather(const char* path);
  void create();
  void wait_ready();
  void estimate_clocks();
  void start_load();
  void steer();
  void take_window(bool record, const char* phase);
  void run_phase(bool record, const char* phase, const std::function<bool()>& until);
  void run_backlog();
  std::int64_t backlog(const Counters& c) const {
    const auto expected = static_cast<std::int64_t>(c.sent * w_.subscriptions_per_topic);
    return std::max<std::int64_t>(0, expected - static_cast<std::int64_t>(c.received));
  }

  const Workload& w_;
  const DistributedSettings& s_;
  std::vector<std::unique_ptr<WorkerClient>> workers_;
  std::vector<WorkerClient*> all_, producers_, consumers_;
  std::mt19937_64 random_{std::random_device{}()};
  std::size_t loaded_producers_ = 0;  // producing workers given a topic
  double rate_ = 0;
  RateController controller_;
  OmbResult result_;
  std::unique_ptr<HistogramLogWriter> log_;
  Clock::time_point run_start_, last_window_, last_steer_;
  Counters steer_last_;
  double payload_size_ = 0;
};

Counters DistributedRun::counters() {
  std::vector<std::string> bodies(all_.size());
  each(all_, [&](WorkerClient& w) {
    const auto at = std::find(all_.begin(), all_.end(), &w) - all_.begin();
    bodies[static_cast<std::size_t>(at)] = w.get("/counters-stats");
  });
  Counters sum;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const std::string where = all_[i]->url() + "/counters-stats";
    const auto d = parse(bodies[i], where);
    sum.sent += counter(d, "messagesSent", where);
    sum.received += counter(d, "messagesReceived", where);
    sum.errors += counter(d, "messageSendErrors", where);
  }
  return sum;
}

// /period-stats or /cumulative-latencies of every worker, summed and merged.
Merged DistributedRun::gather(const char* path) {
  std::vector<std::string> bodies(all_.size());
  each(all_, [&](WorkerClient& w) {
    const auto at = std::find(all_.begin(), all_.end(), &w) - all_.begin();
    bodies[static_cast<std::size_t>(at)] = w.get(path);
  });
  Merged merged;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const std::string where = all_[i]->url() + path;
    const auto d = parse(bodies[i], where);
    merged.sent += counter(d, "messagesSent", where);
    merged.errors += counter(d, "messageSendErrors", where);
    merged.bytes_sent += counter(d, "bytesSent", where);
    merged.received += counter(d, "messagesReceived", where);
    merged.bytes_received += counter(d, "bytesReceived", where);
    merged.total_sent += counter(d, "totalMessagesSent", where);
    merged.total_errors += counter(d, "totalMessageSendErrors", where);
    merged.total_received += counter(d, "totalMessagesReceived", where);
    add_histogram(merged.publish, d, "publishLatency", where);
    add_histogram(merged.delay, d, "publishDelayLatency", where);
    add_histogram(merged.end_to_end, d, "endToEndLatency", where);
  }
  return merged;
}

// The driver on every worker, the topics on the first, then the consumers and the producers
// dealt over their workers as OMB deals them.
void DistributedRun::create() {
  each(all_, [](WorkerClient& w) { w.post("/stop-all"); });
  each(all_, [&](WorkerClient& w) { w.post("/initialize-driver", s_.driver_file); });
  const std::string where = all_[0]->url() + "/create-topics";
  const std::string answer = all_[0]->post(
      "/create-topics", format("{\"numberOfTopics\":%u,\"numberOfPartitionsPerTopic\":%u}",
                               w_.topics, w_.partitions_per_topic));
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(answer.data(), answer.size());
  if (d.HasParseError() || !d.IsArray() || d.Size() != w_.topics)
    throw std::runtime_error(where + ": not a list of " + std::to_string(w_.topics) + " topics");
  std::vector<std::string> topics;
  for (const auto& t : d.GetArray()) {
    if (!t.IsString()) throw std::runtime_error(where + ": a topic is not a string");
    topics.emplace_back(t.GetString(), t.GetStringLength());
  }

  std::vector<std::string> consumer_entries;
  for (const auto& topic : topics)
    for (std::uint32_t s = 0; s < w_.subscriptions_per_topic; ++s) {
      const std::string subscription = format("sub-%03u-", s) + random_letters(random_, 7);
      for (std::uint32_t c = 0; c < w_.consumer_per_subscription; ++c)
        consumer_entries.push_back("{\"topic\":" + text::json_quote(topic) +
                                   ",\"subscription\":" + text::json_quote(subscription) + "}");
    }
  std::shuffle(consumer_entries.begin(), consumer_entries.end(), random_);
  std::vector<std::string> consumer_lists(consumers_.size());
  for (std::size_t i = 0; i < consumer_entries.size(); ++i) {
    auto& list = consumer_lists[i % consumers_.size()];
    list += (list.empty() ? "" : ",") + consumer_entries[i];
  }
  each(consumers_, [&](WorkerClient& w) {
    const auto at = std::find(consumers_.begin(), consumers_.end(), &w) - consumers_.begin();
    w.post("/create-consumers",
           "{\"topicsSubscriptions\":[" + consumer_lists[static_cast<std::size_t>(at)] + "]}");
  });

  std::vector<std::string> producer_topics;
  for (const auto& topic : topics)
    for (std::uint32_t p = 0; p < w_.producers_per_topic; ++p) producer_topics.push_back(topic);
  std::shuffle(producer_topics.begin(), producer_topics.end(), random_);
  std::vector<std::string> producer_lists(producers_.size());
  for (std::size_t i = 0; i < producer_topics.size(); ++i) {
    auto& list = producer_lists[i % producers_.size()];
    list += (list.empty() ? "" : ",") + text::json_quote(producer_topics[i]);
  }
  loaded_producers_ = static_cast<std::size_t>(std::count_if(
      producer_lists.begin(), producer_lists.end(), [](const auto& l) { return !l.empty(); }));
  each(producers_, [&](WorkerClient& w) {
    const auto at = std::find(producers_.begin(), producers_.end(), &w) - producers_.begin();
    w.post("/create-producers", "[" + producer_lists[static_cast<std::size_t>(at)] + "]");
  });
}

// The probe, and the wait until every subscription has it.
void DistributedRun::wait_ready() {
  each(producers_, [](WorkerClient& w) { w.post("/probe-producers"); });
  const std::uint64_t expected = std::uint64_t{w_.topics} * w_.subscriptions_per_topic;
  const auto start = Clock::now();
  for (;;) {
    const Counters c = counters();
    if (c.received >= expected) break;
    if (stopped()) throw std::runtime_error("interrupted while waiting for the consumers");
    if (Clock::now() - start > s_.ready_timeout)
      throw std::runtime_error(format(
          "the consumers did not receive the probe within %.0f s "
          "(%llu of %llu subscriptions)",
          std::chrono::duration<double>(s_.ready_timeout).count(),
          static_cast<unsigned long long>(c.received), static_cast<unsigned long long>(expected)));
    std::this_thread::sleep_for(milliseconds(100));
  }
  if (s_.progress)
    s_.progress(format("consumers ready in %.3f s",
                       std::chrono::duration<double>(Clock::now() - start).count()));
}

// Each worker's clock against this one, by round trips to polybus's clock endpoint (the
// quickest of 16 gives the offset, within half its time), told to the worker so that its send
// and receive times are on this clock: skew between machines then does not pass for latency.
void DistributedRun::estimate_clocks() {
  std::vector<OmbResult::Clock> clocks(all_.size());
  each(all_, [&](WorkerClient& w) {
    auto& clock =
        clocks[static_cast<std::size_t>(std::find(all_.begin(), all_.end(), &w) - all_.begin())];
    std::int64_t best_rtt = INT64_MAX, best_offset = 0;
    for (int i = 0; i < 16; ++i) {
      const std::int64_t t0 = wall_clock_ns();
      std::string body;
      try {
        body = w.get("/polybus/clock");
      } catch (const WorkerCallError& e) {
        if (e.status == 404) return;  // not a polybus worker: unknown
        throw;
      }
      const std::int64_t t1 = wall_clock_ns();
      const std::string where = w.url() + "/polybus/clock";
      const auto d = parse(body, where);
      const auto it = d.FindMember("wallNanos");
      constexpr std::int64_t kDay = 86'400'000'000'000;
      if (it == d.MemberEnd() || !it->value.IsInt64() || it->value.GetInt64() < t0 - kDay ||
          it->value.GetInt64() > t0 + kDay)
        throw std::runtime_error(where + ": no wallNanos within a day of this clock");
      if (t1 - t0 < best_rtt) {
        best_rtt = t1 - t0;
        best_offset = it->value.GetInt64() - (t0 + t1) / 2;
      }
    }
    w.post("/polybus/clock-offset", std::to_string(best_offset));
    clock.known = true;
    clock.offset_ms = static_cast<double>(best_offset) / 1e6;
    clock.error_ms = static_cast<double>(best_rtt) / 2e6;
  });
  std::string unknown;
  for (std::size_t i = 0; i < clocks.size(); ++i)
    if (!clocks[i].known) unknown += (unknown.empty() ? "" : ", ") + all_[i]->url();
  if (!unknown.empty())
    result_.unmapped.push_back("end-to-end latency: " + unknown +
                               " answer no clock (not polybus workers), so the difference of "
                               "their clocks counts as latency");
  result_.clocks = std::move(clocks);
}

void DistributedRun::start_load() {
  const auto payloads = workload_payloads(w_);
  payload_size_ = static_cast<double>(payloads.front().size());
  std::string data;
  for (const auto& p : payloads) {
    std::string encoded;
    text::append_base64(encoded, p);
    data += (data.empty() ? "\"" : ",\"") + encoded + "\"";
  }
  rate_ = w_.producer_rate == 0 ? 10'000.0 : static_cast<double>(w_.producer_rate);
  const double share = rate_ / static_cast<double>(std::max<std::size_t>(1, loaded_producers_));
  const std::string body =
      "{\"payloadData\":[" + data + "],\"publishRate\":" + format("%.6f", share) +
      ",\"keyDistributorType\":\"" + key_distributor_name(w_.key_distributor) + "\"}";
  steer_last_ = counters();  // the rate controller's first period starts here, probe excluded
  each(producers_, [&](WorkerClient& w) { w.post("/start-load", body); });
  run_start_ = last_steer_ = Clock::now();
}

// producerRate 0: OMB's rate controller every 3 s, on the workers' totals.
void DistributedRun::steer() {
  const auto now = Clock::now();
  const double period = std::chrono::duration<double>(now - last_steer_).count();
  Counters c = counters();
  const std::uint64_t copies = std::max<std::uint32_t>(1, w_.subscriptions_per_topic);
  c.received /= copies;
  rate_ = controller_.next(rate_, period, c.sent, c.received, c.sent - steer_last_.sent,
                           c.received - steer_last_.received);
  steer_last_ = c;
  last_steer_ = now;
  const double share =
      std::max(1.0, rate_ / static_cast<double>(std::max<std::size_t>(1, loaded_producers_)));
  each(producers_, [&](WorkerClient& w) { w.post("/adjust-publish-rate", format("%.6f", share)); });
}

void DistributedRun::take_window(bool record, const char* phase) {
  const auto now = Clock::now();
  const Merged m = gather("/period-stats");
  Window window;
  window.phase = phase;
  window.start_seconds = std::chrono::duration<double>(last_window_ - run_start_).count();
  window.seconds = std::chrono::duration<double>(now - last_window_).count();
  window.published = m.sent, window.errors = m.errors, window.received = m.received;
  window.backlog = backlog(Counters{m.total_sent, m.total_errors, m.total_received});
  window.publish = &m.publish, window.delay = &m.delay, window.end_to_end = &m.end_to_end;
  if (record) record_window(result_, window, log_.get());
  if (s_.progress) s_.progress(window_line(window, payload_size_));
  last_window_ = now;
}

void DistributedRun::run_phase(bool record, const char* phase, const std::function<bool()>& until) {
  const bool find_rate = w_.producer_rate == 0;
  last_window_ = Clock::now();
  while (!stopped() && !until()) {
    std::this_thread::sleep_for(milliseconds(20));
    const auto now = Clock::now();
    if (find_rate && now - last_steer_ >= std::chrono::seconds(3)) steer();
    if (now - last_window_ >= s_.window) take_window(record, phase);
  }
  const auto left = Clock::now() - last_window_;
  if ((stopped() && left >= milliseconds(1)) || left >= s_.window / 10) take_window(record, phase);
}

// consumerBacklogSizeGB: the consumers paused until the backlog holds it, then resumed until it
// is drained to OMB's level; the totals read every second, then every 100 ms, as OMB reads them.
void DistributedRun::run_backlog() {
  const double target = static_cast<double>(w_.consumer_backlog_bytes()) / payload_size_;
  result_.backlog_bytes = w_.consumer_backlog_bytes();
  result_.backlog_messages = static_cast<std::uint64_t>(target);
  const auto since = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  each(consumers_, [](WorkerClient& w) { w.post("/pause-consumers"); });
  auto last_look = Clock::now();
  const auto built = [&](milliseconds every, const std::function<bool(std::int64_t)>& done) {
    return [&, every, done] {
      if (Clock::now() - last_look < every) return false;
      last_look = Clock::now();
      return done(backlog(counters()));
    };
  };
  const auto build_start = Clock::now();
  run_phase(true, "backlog", built(milliseconds(1000), [&](std::int64_t b) {
              return static_cast<double>(b) >= target;
            }));
  if (!stopped()) result_.backlog_built_seconds = since(build_start);
  each(consumers_, [](WorkerClient& w) { w.post("/resume-consumers"); });
  const auto drained =
      static_cast<std::int64_t>(std::max(1000.0, (1.0 - w_.backlog_drain_ratio) * target));
  const auto drain_start = Clock::now();
  run_phase(true, "drain", built(milliseconds(100), [&](std::int64_t b) { return b <= drained; }));
  if (!stopped()) result_.backlog_drained_seconds = since(drain_start);
}

OmbResult DistributedRun::run() {
  result_ = result_for(w_, s_.driver, s_.url, s_.window);
  result_.workers = s_.workers;
  result_.producing_workers = static_cast<std::uint32_t>(producers_.size());

  create();
  wait_ready();
  estimate_clocks();
  start_load();
  if (s_.histogram_log)
    log_ = std::make_unique<HistogramLogWriter>(
        *s_.histogram_log,
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
        "[polybus bench: " + w_.name + " on " + s_.driver + " over " + std::to_string(all_.size()) +
            " workers; values in microseconds]");
  const auto warmup_end = Clock::now() + w_.warmup_duration();
  if (w_.warmup_duration().count() > 0) {
    run_phase(false, "warm-up", [&] { return Clock::now() >= warmup_end; });
    gather("/cumulative-latencies");  // OMB reads and drops them
  }
  each(all_, [](WorkerClient& w) { w.post("/reset-stats"); });
  const auto test_start = Clock::now();
  if (w_.consumer_backlog_bytes() > 0 && !stopped()) run_backlog();
  const auto test_end = Clock::now() + w_.test_duration();
  run_phase(true, "test", [&] { return Clock::now() >= test_end; });
  const double test_seconds = std::chrono::duration<double>(Clock::now() - test_start).count();
  if (stopped()) {
    result_.complete = false;
    result_.incomplete_because = format("interrupted after %.1f s of the test", test_seconds);
  }
  const Merged total = gather("/cumulative-latencies");
  record_totals(result_, total.publish, total.delay, total.end_to_end);
  const Counters c = counters();
  result_.published = c.sent;
  result_.publish_errors = c.errors;
  result_.received = c.received;
  return std::move(result_);
}

}  // namespace

OmbResult run_distributed(const Workload& workload, const DistributedSettings& settings) {
  return DistributedRun(workload, settings).run();
}

}  // namespace polybus::bench::coordinator
