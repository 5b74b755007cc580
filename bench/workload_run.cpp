// SPDX-License-Identifier: Apache-2.0
#include "workload_run.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "histogram_log.hpp"
#include "io_pool.hpp"
#include "latency_recorder.hpp"
#include "paced_sender.hpp"
#include "payload_stamp.hpp"
#include "polybus/client.hpp"
#include "rate_controller.hpp"
#include "result_windows.hpp"

namespace polybus::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Counters {
  std::atomic<std::uint64_t> published{0}, errors{0}, received{0};
  std::mutex first_error_mutex;
  std::string first_error;
  void fail(const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(first_error_mutex);
    if (first_error.empty()) first_error = what;
  }
};

template <typename... Values>
std::string format(const char* pattern, Values... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

}  // namespace

std::vector<std::string> unmapped_fields(const Workload& w, const SchemeTraits& t) {
  std::vector<std::string> out;
  const std::string& s = t.scheme;
  if (!t.pubsub) {
    out.push_back(s +
                  " has no publish/subscribe: each message is a request to its topic, served "
                  "by the topic's consumers; publish latency is the round trip, end-to-end "
                  "is request to responder");
    if (w.subscriptions_per_topic > 1)
      out.push_back("subscriptionsPerTopic " + std::to_string(w.subscriptions_per_topic) +
                    ": a request reaches one responder, so the subscriptions share the requests "
                    "instead of each receiving every one");
    if (w.consumer_backlog_bytes() > 0)
      out.push_back(
          "consumerBacklogSizeGB: a request waits for its responder, so no backlog "
          "builds while they are paused; the test runs without the backlog phase");
  }
  if (w.partitions_per_topic > 1)
    out.push_back("partitionsPerTopic " + std::to_string(w.partitions_per_topic) + ": " + s +
                  " topics have no partitions; each topic is one stream");
  if (w.key_distributor != KeyDistributor::no_key)
    out.push_back(std::string("keyDistributor ") + key_distributor_name(w.key_distributor) + ": " +
                  s + " has no message keys; messages are sent without one");
  if (t.pubsub && !t.consumer_groups && w.consumer_per_subscription > 1)
    out.push_back("consumerPerSubscription " + std::to_string(w.consumer_per_subscription) + ": " +
                  s +
                  " has no consumer groups, so each consumer of a subscription receives "
                  "every message (the backlog counts every copy)");
  if (!t.publish_confirmed)
    out.push_back("publish latency: " + s +
                  " confirms no publish, so a publish completes once "
                  "it was written to the connection");
  return out;
}

namespace {

// One run of a workload, in the order OMB makes it: the clients, the consumers, the producers on
// their sending threads, then the phases (warm-up, backlog, test) in windows, and the totals.
class WorkloadRun {
 public:
  WorkloadRun(const Workload& w, const WorkloadRunSettings& settings)
      : w_(w),
        settings_(settings),
        producer_count_(std::uint64_t{w.topics} * w.producers_per_topic),
        io_(std::min<std::uint64_t>(
            2, std::max<std::uint64_t>(1, producer_count_ + std::uint64_t{w.topics} *
                                                                w.subscriptions_per_topic *
                                                                w.consumer_per_subscription))),
        payloads_(workload_payloads(w)) {
    char nonce[16];
    std::snprintf(nonce, sizeof nonce, "%06x",
                  static_cast<unsigned>(std::random_device{}() & 0xffffff));
    nonce_ = nonce;
  }
  // The sending threads end, then every client is closed (its handlers finished) before what
  // they use and the io threads go, whatever was thrown.
  ~WorkloadRun() {
    stop_sending();
    for (auto& c : clients_) c.close_sync(std::chrono::seconds(10));
  }
  WorkloadRun(const WorkloadRun&) = delete;
  WorkloadRun& operator=(const WorkloadRun&) = delete;

  OmbResult run();

 private:
  bool stopped() const { return settings_.stop && settings_.stop->load(); }
  ClientRef connect_one();
  std::string topic_name(std::uint32_t t) const;
  void describe();
  void subscribe_all();
  void probe_payload();
  void start_sending();
  void stop_sending();
  std::int64_t backlog_now() const;
  void take_window(bool record, const char* phase);
  // Runs until `until` says stop, taking a window every settings.window, and steering the rate
  // every 3 s when the workload asks for the highest sustainable one.
  void run_phase(bool record, const char* phase, const std::function<bool()>& until);
  void run_backlog();
  void collect_totals();

  const Workload& w_;
  const WorkloadRunSettings& settings_;
  const std::uint64_t producer_count_;
  IoPool io_;
  // What the clients' handlers and completions touch, declared before the clients.
  Counters counters_;
  LatencyRecorder publish_latency_, publish_delay_, end_to_end_;
  std::vector<Client> clients_;
  std::vector<Subscription> subscriptions_;
  const std::vector<std::string> payloads_;
  std::string nonce_;
  ClientRef probe_;
  Capabilities caps_;
  SchemeTraits traits_;
  std::uint64_t copies_ = 1;  // deliveries each message makes
  OmbResult result_;

  std::unique_ptr<PacedSender> sender_;  // its completions touch the counters and recorders

  // The windows, and the rate controller's last look.
  SteadyClock::time_point run_start_, last_window_, last_steer_;
  double run_start_epoch_ = 0;  // run_start_ in seconds since the epoch, for the histogram log
  std::unique_ptr<HistogramLogWriter> log_;
  std::uint64_t last_published_ = 0, last_errors_ = 0, last_received_ = 0;
  std::uint64_t steer_published_ = 0, steer_received_ = 0;
  RateController controller_;
};

ClientRef WorkloadRun::connect_one() {
  ConnectOptions options;
  options.io_context = io_.next();
  clients_.push_back(polybus::connect(settings_.url, std::move(options)));
  return ClientRef(clients_.back());
}

std::string WorkloadRun::topic_name(std::uint32_t t) const {
  char name[64];
  std::snprintf(name, sizeof name, "omb-%s-%04u", nonce_.c_str(), t);
  return name;
}

// What the scheme is, and the result's description of the run.
void WorkloadRun::describe() {
  probe_ = connect_one();
  caps_ = probe_.capabilities();
  traits_ = SchemeTraits{probe_.scheme(), caps_.publish && caps_.subscribe, caps_.consumer_groups,
                         caps_.publish_confirmed};
  if (!traits_.pubsub && !caps_.request_reply)
    throw std::runtime_error(probe_.scheme() + " can neither publish/subscribe nor request/reply");
  copies_ = traits_.pubsub ? std::uint64_t{w_.subscriptions_per_topic} *
                                 (caps_.consumer_groups ? 1 : w_.consumer_per_subscription)
                           : 1;
  result_ = result_for(w_, settings_.driver, settings_.url, settings_.window);
  result_.unmapped = unmapped_fields(w_, traits_);
  if (payloads_.front().size() < kLongestStamp)
    result_.unmapped.push_back("end-to-end latency: a " + std::to_string(payloads_.front().size()) +
                               "-byte message is too short to carry its send time (" +
                               std::to_string(kLongestStamp) + " bytes)");
}

// Consumers first, as OMB creates them, so that no message is published before it has a
// subscription to go to.
void WorkloadRun::subscribe_all() {
  auto on_receipt = [this](std::string_view payload) {
    if (auto sent = payload_stamp(payload)) {
      const std::int64_t micros = (wall_clock_ns() - *sent) / 1000;
      if (micros >= 0) end_to_end_.record(micros);
    }
    ++counters_.received;
  };
  const auto subscribe_start = SteadyClock::now();
  for (std::uint32_t t = 0; t < w_.topics; ++t)
    for (std::uint32_t s = 0; s < w_.subscriptions_per_topic; ++s)
      for (std::uint32_t c = 0; c < w_.consumer_per_subscription; ++c) {
        ClientRef client = connect_one();
        SubscribeOptions options;
        if (traits_.pubsub) {
          if (caps_.consumer_groups) options.group = "sub-" + std::to_string(s) + "-" + nonce_;
          subscriptions_.push_back(client.subscribe(
              topic_name(t), options, [on_receipt](Message& m) { on_receipt(m.payload()); }));
        } else {
          subscriptions_.push_back(client.serve(topic_name(t), options, [on_receipt](Message& m) {
            on_receipt(m.payload());
            return std::string("ok");
          }));
        }
      }
  for (auto& sub : subscriptions_)
    if (auto status = sub.wait_ready(settings_.subscribe_timeout))
      throw std::runtime_error("a subscription failed: " + status.message());
  const double subscribe_seconds =
      std::chrono::duration<double>(SteadyClock::now() - subscribe_start).count();
  if (settings_.progress)
    settings_.progress(
        format("%zu subscription(s) ready in %.3f s", subscriptions_.size(), subscribe_seconds));
}

// One message to a topic of its own first: a payload the scheme refuses (QuickIO's text
// payloads are UTF-8) fails the run here, with the broker's words, not as every publish.
void WorkloadRun::probe_payload() {
  if (!traits_.pubsub || producer_count_ == 0) return;
  PublishOptions options;
  options.timeout = std::chrono::seconds(30);
  if (auto status =
          probe_.publish_sync(topic_name(w_.topics) + "-probe", payloads_.front(), options))
    throw std::runtime_error("the workload's payload was refused: " + status.message());
}

// Producers, spread over a few sending threads, each sending at its share of the rate.
void WorkloadRun::start_sending() {
  std::vector<PacedProducer> producers;
  for (std::uint32_t t = 0; t < w_.topics; ++t)
    for (std::uint32_t p = 0; p < w_.producers_per_topic; ++p)
      producers.push_back(PacedProducer{connect_one(), topic_name(t)});
  PacedSenderSettings settings;
  settings.rate = w_.producer_rate == 0 ? 10'000.0 : static_cast<double>(w_.producer_rate);
  settings.threads = 4;
  settings.window = settings_.max_in_flight_per_producer;
  settings.requests = !traits_.pubsub;
  PacedSenderHooks hooks;
  hooks.on_send = [this](std::int64_t delay_us) { publish_delay_.record(delay_us); };
  hooks.on_published = [this](std::size_t, std::int64_t latency_us) {
    publish_latency_.record(latency_us);
    ++counters_.published;
  };
  hooks.on_failed = [this](const std::string& error) { counters_.fail(error); };
  run_start_ = SteadyClock::now();
  run_start_epoch_ = static_cast<double>(wall_clock_ns()) / 1e9;
  sender_ =
      std::make_unique<PacedSender>(std::move(producers), payloads_, settings, std::move(hooks));
}

// The sending threads end; what is still in flight completes (or fails) within the client's
// op_timeout.
void WorkloadRun::stop_sending() {
  if (sender_) sender_->stop(std::chrono::seconds(60));
}

std::int64_t WorkloadRun::backlog_now() const {
  const auto expected = copies_ * counters_.published.load();
  const auto received = counters_.received.load();
  return expected > received ? static_cast<std::int64_t>(expected - received) : 0;
}

// What happened since the last window, as OMB's printAndCollectStats takes it.
void WorkloadRun::take_window(bool record, const char* phase) {
  const auto now = SteadyClock::now();
  const std::uint64_t published = counters_.published.load(), errors = counters_.errors.load(),
                      received = counters_.received.load();
  const HdrHistogram pub = publish_latency_.take_period();
  const HdrHistogram delay = publish_delay_.take_period();
  const HdrHistogram e2e = end_to_end_.take_period();
  Window window;
  window.phase = phase;
  window.start_seconds = std::chrono::duration<double>(last_window_ - run_start_).count();
  window.seconds = std::chrono::duration<double>(now - last_window_).count();
  window.published = published - last_published_;
  window.errors = errors - last_errors_;
  window.received = received - last_received_;
  window.backlog = backlog_now();
  window.publish = &pub, window.delay = &delay, window.end_to_end = &e2e;
  if (record) record_window(result_, window, log_.get());
  if (settings_.progress)
    settings_.progress(window_line(window, static_cast<double>(payloads_.front().size())));
  last_published_ = published, last_errors_ = errors, last_received_ = received;
  last_window_ = now;
}

void WorkloadRun::run_phase(bool record, const char* phase, const std::function<bool()>& until) {
  const bool find_rate = w_.producer_rate == 0;
  last_window_ = SteadyClock::now();
  while (!stopped() && !until()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto now = SteadyClock::now();
    if (find_rate && now - last_steer_ >= std::chrono::seconds(3)) {
      const double period = std::chrono::duration<double>(now - last_steer_).count();
      const auto published = counters_.published.load(),
                 received = counters_.received.load() / copies_;
      sender_->set_rate(controller_.next(sender_->rate(), period, published, received,
                                         published - steer_published_, received - steer_received_));
      steer_published_ = published, steer_received_ = received;
      last_steer_ = now;
    }
    if (now - last_window_ >= settings_.window) take_window(record, phase);
  }
  // What is left since the last window: a window of its own when interrupted or when it is
  // a real part of one, else the few milliseconds the last check ran late.
  const auto left = SteadyClock::now() - last_window_;
  if ((stopped() && left >= std::chrono::milliseconds(1)) || left >= settings_.window / 10)
    take_window(record, phase);
}

// consumerBacklogSizeGB: the consumers paused until the backlog is built, then drained to OMB's
// level.
void WorkloadRun::run_backlog() {
  const double target_messages = static_cast<double>(w_.consumer_backlog_bytes()) /
                                 static_cast<double>(payloads_.front().size());
  result_.backlog_bytes = w_.consumer_backlog_bytes();
  result_.backlog_messages = static_cast<std::uint64_t>(target_messages);
  const auto since = [](SteadyClock::time_point from) {
    return std::chrono::duration<double>(SteadyClock::now() - from).count();
  };
  for (auto& sub : subscriptions_) sub.pause();
  const auto build_start = SteadyClock::now();
  run_phase(true, "backlog", [&] { return static_cast<double>(backlog_now()) >= target_messages; });
  if (!stopped()) result_.backlog_built_seconds = since(build_start);
  for (auto& sub : subscriptions_) sub.resume();
  // OMB's level: drained to (1 - backlogDrainRatio) of it, or to 1,000 messages.
  const auto drained =
      static_cast<std::int64_t>(std::max(1000.0, (1.0 - w_.backlog_drain_ratio) * target_messages));
  const auto drain_start = SteadyClock::now();
  run_phase(true, "drain", [&] { return backlog_now() <= drained; });
  if (!stopped()) result_.backlog_drained_seconds = since(drain_start);
}

void WorkloadRun::collect_totals() {
  record_totals(result_, publish_latency_.total(), publish_delay_.total(), end_to_end_.total());
  result_.published = counters_.published.load();
  result_.publish_errors = counters_.errors.load();
  result_.received = counters_.received.load();
  std::lock_guard<std::mutex> lock(counters_.first_error_mutex);
  result_.first_error = counters_.first_error;
}

OmbResult WorkloadRun::run() {
  describe();
  subscribe_all();
  probe_payload();
  start_sending();
  if (settings_.histogram_log)
    log_ = std::make_unique<HistogramLogWriter>(
        *settings_.histogram_log, run_start_epoch_,
        "[polybus bench: " + w_.name + " on " + settings_.driver + "; values in microseconds]");
  last_steer_ = SteadyClock::now();

  const auto warmup_end = SteadyClock::now() + w_.warmup_duration();
  if (w_.warmup_duration().count() > 0)
    run_phase(false, "warm-up", [&] { return SteadyClock::now() >= warmup_end; });
  // OMB resets the latencies only: counts and the backlog carry over into the test.
  publish_latency_.reset();
  publish_delay_.reset();
  end_to_end_.reset();
  const auto test_start = SteadyClock::now();
  if (w_.consumer_backlog_bytes() > 0 && traits_.pubsub && !stopped()) run_backlog();
  const auto test_end = SteadyClock::now() + w_.test_duration();
  run_phase(true, "test", [&] { return SteadyClock::now() >= test_end; });
  const double test_seconds =
      std::chrono::duration<double>(SteadyClock::now() - test_start).count();
  if (stopped()) {
    result_.complete = false;
    result_.incomplete_because =
        "interrupted after " + format("%.1f", test_seconds) + " s of the test";
  }
  stop_sending();
  collect_totals();
  for (auto& sub : subscriptions_) sub.unsubscribe_sync(std::chrono::seconds(10));
  return std::move(result_);
}

}  // namespace

OmbResult run_workload(const Workload& w, const WorkloadRunSettings& settings) {
  return WorkloadRun(w, settings).run();
}

}  // namespace polybus::bench
