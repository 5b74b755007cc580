// SPDX-License-Identifier: Apache-2.0
#include "omb_result.hpp"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cmath>
#include <cstdio>

namespace polybus::bench {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void key(Writer& w, const char* name) {
  w.Key(name);
}
void string(Writer& w, const std::string& value) {
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}
// A double that JSON can hold (NaN and infinities are not JSON).
void number(Writer& w, double value) {
  w.Double(std::isfinite(value) ? value : 0.0);
}

template <typename T, typename Write>
void list(Writer& w, const char* name, const std::vector<T>& values, Write write) {
  key(w, name);
  w.StartArray();
  for (const auto& v : values) write(v);
  w.EndArray();
}

// The eight series of one latency: Avg, 50pct ... 9999pct, Max, as OMB names them. OMB's publish
// delay series are integers (microseconds) but their average.
void series(Writer& w, const std::string& prefix, const LatencySeries& s, bool integers) {
  struct Field {
    const char* suffix;
    double LatencySummary::*member;
  };
  const Field fields[] = {{"Avg", &LatencySummary::avg},       {"50pct", &LatencySummary::p50},
                          {"75pct", &LatencySummary::p75},     {"95pct", &LatencySummary::p95},
                          {"99pct", &LatencySummary::p99},     {"999pct", &LatencySummary::p999},
                          {"9999pct", &LatencySummary::p9999}, {"Max", &LatencySummary::max}};
  for (const auto& f : fields) {
    key(w, (prefix + f.suffix).c_str());
    w.StartArray();
    for (const auto& window : s.windows) {
      if (integers && f.member != &LatencySummary::avg)
        w.Int64(static_cast<std::int64_t>(window.*(f.member)));
      else
        number(w, window.*(f.member));
    }
    w.EndArray();
  }
}

void aggregated(Writer& w, const std::string& prefix, const LatencySummary& s, bool integers) {
  const std::pair<const char*, double> fields[] = {
      {"Avg", s.avg},   {"50pct", s.p50},   {"75pct", s.p75},     {"95pct", s.p95},
      {"99pct", s.p99}, {"999pct", s.p999}, {"9999pct", s.p9999}, {"Max", s.max}};
  for (const auto& [suffix, value] : fields) {
    key(w, (prefix + suffix).c_str());
    if (integers && std::string(suffix) != "Avg")
      w.Int64(static_cast<std::int64_t>(value));
    else
      number(w, value);
  }
}

// Jackson writes a Map<Double, ...>'s keys as the doubles' strings ("99.0", "99.9123").
void quantile_map(Writer& w, const char* name, const std::map<double, double>& q, bool integers) {
  key(w, name);
  w.StartObject();
  for (const auto& [percentile, value] : q) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", percentile);
    std::string k = text;
    if (k.find_first_of(".e") == std::string::npos) k += ".0";
    string(w, k);
    if (integers)
      w.Int64(static_cast<std::int64_t>(value));
    else
      number(w, value);
  }
  w.EndObject();
}

}  // namespace

LatencySummary summarize(const HdrHistogram& us, double divisor) {
  LatencySummary s;
  s.avg = us.mean() / divisor;
  s.p50 = static_cast<double>(us.value_at_percentile(50)) / divisor;
  s.p75 = static_cast<double>(us.value_at_percentile(75)) / divisor;
  s.p95 = static_cast<double>(us.value_at_percentile(95)) / divisor;
  s.p99 = static_cast<double>(us.value_at_percentile(99)) / divisor;
  s.p999 = static_cast<double>(us.value_at_percentile(99.9)) / divisor;
  s.p9999 = static_cast<double>(us.value_at_percentile(99.99)) / divisor;
  s.max = static_cast<double>(us.max()) / divisor;
  return s;
}

std::map<double, double> quantiles(const HdrHistogram& us, double divisor) {
  std::map<double, double> out;
  const std::int64_t total = us.total_count();
  if (total == 0) return out;
  constexpr double kTicksPerHalfDistance = 100;
  double next = 0;  // the percentile to reach next
  std::int64_t seen = 0;
  for (std::int32_t i = 0; i <= us.max_index(); ++i) {
    const std::int64_t count = us.count_at_index(i);
    if (count == 0) continue;
    seen += count;
    const double reached = 100.0 * static_cast<double>(seen) / static_cast<double>(total);
    const double value = static_cast<double>(us.highest_equivalent(us.value_at_index(i))) / divisor;
    if (seen == total) {
      out[100.0] = value;
      break;
    }
    bool emitted = false;
    while (next <= reached) {
      if (!emitted) out[reached] = value, emitted = true;
      // Each halving of the distance to 100% gets the same number of ticks.
      const double ticks =
          kTicksPerHalfDistance * std::pow(2, std::floor(std::log2(100.0 / (100.0 - next))) + 1);
      next += 100.0 / ticks;
    }
  }
  return out;
}

std::string to_json(const OmbResult& r) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  key(w, "workload"), string(w, r.workload);
  key(w, "driver"), string(w, r.driver);
  key(w, "messageSize"), w.Uint64(r.message_size);
  key(w, "topics"), w.Uint(r.topics);
  key(w, "partitions"), w.Uint(r.partitions);
  key(w, "producersPerTopic"), w.Uint(r.producers_per_topic);
  key(w, "consumersPerTopic"), w.Uint(r.consumers_per_topic);
  auto doubles = [&](const char* name, const std::vector<double>& v) {
    list(w, name, v, [&](double x) { number(w, x); });
  };
  doubles("publishRate", r.publish_rate);
  doubles("publishErrorRate", r.publish_error_rate);
  doubles("consumeRate", r.consume_rate);
  list(w, "backlog", r.backlog, [&](std::int64_t x) { w.Int64(x); });
  series(w, "publishLatency", r.publish_latency, false);
  series(w, "publishDelayLatency", r.publish_delay, true);
  aggregated(w, "aggregatedPublishLatency", r.aggregated_publish, false);
  aggregated(w, "aggregatedPublishDelayLatency", r.aggregated_delay, true);
  quantile_map(w, "aggregatedPublishLatencyQuantiles", r.publish_quantiles, false);
  quantile_map(w, "aggregatedPublishDelayLatencyQuantiles", r.delay_quantiles, true);
  series(w, "endToEndLatency", r.end_to_end, false);
  quantile_map(w, "aggregatedEndToEndLatencyQuantiles", r.end_to_end_quantiles, false);
  aggregated(w, "aggregatedEndToEndLatency", r.aggregated_end_to_end, false);

  key(w, "polybus");
  w.StartObject();
  key(w, "url"), string(w, r.url);
  if (!r.workers.empty()) {
    list(w, "workers", r.workers, [&](const std::string& s) { string(w, s); });
    key(w, "producingWorkers"), w.Uint(r.producing_workers);
    bool corrected = !r.clocks.empty();
    for (const auto& c : r.clocks) corrected = corrected && c.known;
    key(w, "clocks");
    w.StartObject();
    key(w, "endToEndCorrected"), w.Bool(corrected);
    list(w, "workers", r.clocks, [&](const OmbResult::Clock& c) {
      w.StartObject();
      key(w, "known"), w.Bool(c.known);
      if (c.known)
        key(w, "offsetMs"), number(w, c.offset_ms), key(w, "errorMs"), number(w, c.error_ms);
      w.EndObject();
    });
    w.EndObject();
  }
  key(w, "complete"), w.Bool(r.complete);
  if (!r.complete) key(w, "incompleteBecause"), string(w, r.incomplete_because);
  key(w, "windowSeconds"), number(w, r.window_seconds);
  doubles("windowStartSeconds", r.window_start_seconds);
  list(w, "windowPhases", r.window_phases, [&](const std::string& s) { string(w, s); });
  if (r.backlog_bytes > 0) {
    key(w, "consumerBacklog");
    w.StartObject();
    key(w, "bytes"), w.Uint64(r.backlog_bytes);
    key(w, "messages"), w.Uint64(r.backlog_messages);
    key(w, "builtSeconds"), number(w, r.backlog_built_seconds);
    key(w, "drainedSeconds"), number(w, r.backlog_drained_seconds);
    w.EndObject();
  }
  key(w, "published"), w.Uint64(r.published);
  key(w, "publishErrors"), w.Uint64(r.publish_errors);
  key(w, "received"), w.Uint64(r.received);
  if (!r.first_error.empty()) key(w, "firstError"), string(w, r.first_error);
  list(w, "unmapped", r.unmapped, [&](const std::string& s) { string(w, s); });
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace polybus::bench
