// SPDX-License-Identifier: Apache-2.0
#include "result_windows.hpp"

#include <algorithm>
#include <cstdio>

namespace polybus::bench {
namespace {

double per_second(std::uint64_t count, double seconds) {
  return static_cast<double>(count) / std::max(1e-9, seconds);
}

}  // namespace

OmbResult result_for(const Workload& w, const std::string& driver, const std::string& url,
                     std::chrono::milliseconds window) {
  OmbResult r;
  r.workload = w.name;
  r.driver = driver;
  r.url = url;
  r.message_size = w.message_size;
  r.topics = w.topics;
  r.partitions = w.partitions_per_topic;
  r.producers_per_topic = w.producers_per_topic;
  r.consumers_per_topic = w.consumer_per_subscription;  // as OMB fills it
  r.window_seconds = std::chrono::duration<double>(window).count();
  return r;
}

void record_window(OmbResult& r, const Window& w, HistogramLogWriter* log) {
  r.publish_rate.push_back(per_second(w.published, w.seconds));
  r.publish_error_rate.push_back(per_second(w.errors, w.seconds));
  r.consume_rate.push_back(per_second(w.received, w.seconds));
  r.backlog.push_back(w.backlog);
  r.publish_latency.windows.push_back(summarize(*w.publish, 1000));
  r.publish_delay.windows.push_back(summarize(*w.delay, 1));
  r.end_to_end.windows.push_back(summarize(*w.end_to_end, 1000));
  r.window_start_seconds.push_back(w.start_seconds);
  r.window_phases.emplace_back(w.phase);
  if (log) {
    log->write("publish", w.start_seconds, w.seconds, *w.publish);
    log->write("publish-delay", w.start_seconds, w.seconds, *w.delay);
    log->write("end-to-end", w.start_seconds, w.seconds, *w.end_to_end);
  }
}

std::string window_line(const Window& w, double payload_size) {
  const double publish_rate = per_second(w.published, w.seconds);
  const LatencySummary pub_ms = summarize(*w.publish, 1000),
                       e2e_ms = summarize(*w.end_to_end, 1000);
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: pub %.1f msg/s, %.2f MB/s, %.1f err/s | cons %.1f msg/s | backlog %.1f K | "
                "pub latency ms avg %.3f p50 %.3f p99 %.3f max %.3f | e2e ms p50 %.3f p99 %.3f",
                w.phase, publish_rate, publish_rate * payload_size / (1 << 20),
                per_second(w.errors, w.seconds), per_second(w.received, w.seconds),
                static_cast<double>(w.backlog) / 1000, pub_ms.avg, pub_ms.p50, pub_ms.p99,
                pub_ms.max, e2e_ms.p50, e2e_ms.p99);
  return line;
}

void record_totals(OmbResult& r, const HdrHistogram& publish, const HdrHistogram& delay,
                   const HdrHistogram& end_to_end) {
  r.aggregated_publish = summarize(publish, 1000);
  r.aggregated_delay = summarize(delay, 1);
  r.aggregated_end_to_end = summarize(end_to_end, 1000);
  r.publish_quantiles = quantiles(publish, 1000);
  r.delay_quantiles = quantiles(delay, 1);
  r.end_to_end_quantiles = quantiles(end_to_end, 1000);
}

}  // namespace polybus::bench
