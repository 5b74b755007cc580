// SPDX-License-Identifier: Apache-2.0
#include "worker_stats.hpp"

#include <utility>

#include "bench/histogram_codec.hpp"
#include "worker_json.hpp"

namespace polybus::bench::worker {
namespace {

// OMB's worker keeps 5 significant digits; 3 keep each histogram at 140 to 220 KB of counts
// instead of 10 to 20 MB, and the coordinator adds histograms of any precision.
constexpr int kDigits = 3;
constexpr std::int64_t kPublishHighestUs = 60'000'000;         // 60 s
constexpr std::int64_t kEndToEndHighestUs = 43'200'000'000LL;  // 12 h

std::string number(std::uint64_t value) {
  return std::to_string(value);
}

std::string histogram(const HdrHistogram& h) {
  return json_string(encode_compressed_base64(h));
}

}  // namespace

WorkerStats::WorkerStats()
    : publish_latency_(HdrHistogram(1, kPublishHighestUs, kDigits)),
      publish_delay_(HdrHistogram(1, kPublishHighestUs, kDigits)),
      end_to_end_(HdrHistogram(1, kEndToEndHighestUs, kDigits)) {}

void WorkerStats::sent(std::size_t bytes, std::int64_t publish_latency_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++sent_;
  ++total_sent_;
  bytes_sent_ += bytes;
  publish_latency_.record(publish_latency_us);
}

void WorkerStats::probe_sent() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++total_sent_;
}

void WorkerStats::send_failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++send_errors_;
  ++total_send_errors_;
}

void WorkerStats::send_delayed(std::int64_t delay_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  publish_delay_.record(delay_us);
}

void WorkerStats::received(std::size_t bytes, std::optional<std::int64_t> end_to_end_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++received_;
  ++total_received_;
  bytes_received_ += bytes;
  if (end_to_end_us) end_to_end_.record(*end_to_end_us);
}

std::string WorkerStats::take_period_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto take = [](std::uint64_t& counter) { return number(std::exchange(counter, 0)); };
  const auto take_histogram = [](Latency& latency) {
    std::string text = histogram(latency.period);
    latency.period.reset();
    return text;
  };
  return jackson_object({
      {"messagesSent", take(sent_)},
      {"messageSendErrors", take(send_errors_)},
      {"bytesSent", take(bytes_sent_)},
      {"messagesReceived", take(received_)},
      {"bytesReceived", take(bytes_received_)},
      {"totalMessagesSent", number(total_sent_)},
      {"totalMessageSendErrors", number(total_send_errors_)},
      {"totalMessagesReceived", number(total_received_)},
      {"publishLatency", take_histogram(publish_latency_)},
      {"publishDelayLatency", take_histogram(publish_delay_)},
      {"endToEndLatency", take_histogram(end_to_end_)},
  });
}

std::string WorkerStats::take_cumulative_latencies() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto take_histogram = [](Latency& latency) {
    std::string text = histogram(latency.cumulative);
    latency.cumulative.reset();
    return text;
  };
  return jackson_object({
      {"publishLatency", take_histogram(publish_latency_)},
      {"publishDelayLatency", take_histogram(publish_delay_)},
      {"endToEndLatency", take_histogram(end_to_end_)},
  });
}

std::string WorkerStats::counters_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return jackson_object({
      {"messagesSent", number(total_sent_)},
      {"messagesReceived", number(total_received_)},
      {"messageSendErrors", number(total_send_errors_)},
  });
}

void WorkerStats::reset_latencies() {
  std::lock_guard<std::mutex> lock(mutex_);
  publish_latency_.reset();
  publish_delay_.reset();
  end_to_end_.reset();
}

void WorkerStats::reset_for_stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  sent_ = send_errors_ = bytes_sent_ = received_ = bytes_received_ = 0;
  total_sent_ = total_received_ = 0;
  publish_latency_.reset();
  publish_delay_.reset();
  end_to_end_.reset();
}

}  // namespace polybus::bench::worker
