// SPDX-License-Identifier: Apache-2.0
// OMB's result format: every field of OMB's TestResult, with its JSON type, in what polybus
// writes; the quantile maps as HdrHistogram's percentile iteration keys them.
#include <rapidjson/document.h>
#include <catch2/catch.hpp>

#include "bench/omb_result.hpp"

using namespace polybus::bench;

namespace {

enum class Kind { string, integer, number, integer_list, number_list, integer_map, number_map };

// OMB's TestResult (benchmark-framework/.../TestResult.java): Java long/int are JSON integers,
// double JSON numbers, List<...> arrays, Map<Double, ...> objects keyed by the double's text.
const std::vector<std::pair<const char*, Kind>> kTestResult = [] {
  std::vector<std::pair<const char*, Kind>> fields = {
      {"workload", Kind::string},
      {"driver", Kind::string},
      {"messageSize", Kind::integer},
      {"topics", Kind::integer},
      {"partitions", Kind::integer},
      {"producersPerTopic", Kind::integer},
      {"consumersPerTopic", Kind::integer},
      {"publishRate", Kind::number_list},
      {"publishErrorRate", Kind::number_list},
      {"consumeRate", Kind::number_list},
      {"backlog", Kind::integer_list},
      {"aggregatedPublishLatencyQuantiles", Kind::number_map},
      {"aggregatedPublishDelayLatencyQuantiles", Kind::integer_map},
      {"aggregatedEndToEndLatencyQuantiles", Kind::number_map}};
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const char* suffix :
         {"Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max"})
      for (const char* prefix :
           {"publishLatency", "publishDelayLatency", "endToEndLatency", "aggregatedPublishLatency",
            "aggregatedPublishDelayLatency", "aggregatedEndToEndLatency"})
        n.push_back(std::string(prefix) + suffix);
    return n;
  }();
  for (const auto& name : names) {
    const bool aggregated = name.rfind("aggregated", 0) == 0;
    const bool delay = name.find("Delay") != std::string::npos;
    const bool avg = name.size() > 3 && name.substr(name.size() - 3) == "Avg";
    const bool integers = delay && !avg;
    fields.push_back({name.c_str(), aggregated
                                        ? (integers ? Kind::integer : Kind::number)
                                        : (integers ? Kind::integer_list : Kind::number_list)});
  }
  return fields;
}();

bool has_kind(const rapidjson::Value& v, Kind kind) {
  auto all = [&](auto test) {
    if (v.IsArray()) {
      for (const auto& e : v.GetArray())
        if (!test(e)) return false;
      return true;
    }
    for (const auto& m : v.GetObject())
      if (!test(m.value)) return false;
    return true;
  };
  auto integer = [](const rapidjson::Value& e) { return e.IsInt64(); };
  auto number = [](const rapidjson::Value& e) { return e.IsNumber(); };
  switch (kind) {
    case Kind::string:
      return v.IsString();
    case Kind::integer:
      return v.IsInt64();
    case Kind::number:
      return v.IsNumber();
    case Kind::integer_list:
      return v.IsArray() && all(integer);
    case Kind::number_list:
      return v.IsArray() && all(number);
    case Kind::integer_map:
      return v.IsObject() && all(integer);
    case Kind::number_map:
      return v.IsObject() && all(number);
  }
  return false;
}

OmbResult sample() {
  HdrHistogram us = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 5000; ++v) us.record(v * 10);
  OmbResult r;
  r.workload = "w";
  r.driver = "nsq";
  r.message_size = 1024;
  r.topics = 1;
  for (int window = 0; window < 3; ++window) {
    r.publish_rate.push_back(1000.5);
    r.publish_error_rate.push_back(0);
    r.consume_rate.push_back(999.5);
    r.backlog.push_back(12);
    r.publish_latency.windows.push_back(summarize(us, 1000));
    r.publish_delay.windows.push_back(summarize(us, 1));
    r.end_to_end.windows.push_back(summarize(us, 1000));
  }
  r.aggregated_publish = summarize(us, 1000);
  r.aggregated_delay = summarize(us, 1);
  r.aggregated_end_to_end = summarize(us, 1000);
  r.publish_quantiles = quantiles(us, 1000);
  r.delay_quantiles = quantiles(us, 1);
  r.end_to_end_quantiles = quantiles(us, 1000);
  return r;
}

}  // namespace

TEST_CASE("omb result: every field of OMB's TestResult, with its type") {
  const std::string json = to_json(sample());
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(kTestResult.size() == 62);
  for (const auto& [name, kind] : kTestResult) {
    INFO(name);
    REQUIRE(doc.HasMember(name));
    CHECK(has_kind(doc[name], kind));
  }
  CHECK(doc["publishRate"].Size() == 3);
  // 49500 us, reported as the highest value of its bucket (32 us wide there): 49503.
  CHECK(doc["publishDelayLatency99pct"][0].GetInt64() == 49503);
  CHECK(doc["aggregatedPublishLatency50pct"].GetDouble() == Approx(25.0).epsilon(0.001));
  CHECK(doc["polybus"]["complete"].GetBool());
}

TEST_CASE("omb result: quantile keys climb to 100 as HdrHistogram's percentile iteration") {
  const OmbResult r = sample();
  const auto& q = r.delay_quantiles;
  REQUIRE(q.size() > 100);
  CHECK(q.rbegin()->first == 100.0);
  CHECK(q.rbegin()->second == 50015);  // 50000 us: the top of its 32-us bucket
  double last_value = 0;
  for (const auto& [percentile, value] : q) {
    CHECK(value >= last_value);
    last_value = value;
  }
  // Up to 50% in steps of 0.5%: about 100 keys below 50.
  std::size_t below_half = 0;
  for (const auto& entry : q) below_half += entry.first < 50 ? 1 : 0;
  CHECK(below_half >= 95);
  CHECK(below_half <= 101);
  // The keys are written as Jackson writes Double keys: "100.0", not "100".
  const std::string json = to_json(r);
  CHECK(json.find("\"100.0\"") != std::string::npos);
}
