// SPDX-License-Identifier: Apache-2.0
// OMB's worker protocol without HTTP: the JSON as Jackson writes it, the bounds on what a request
// may carry, and one worker producing and consuming on mem:// through every endpoint, its
// counters and histograms read back as OMB's coordinator reads them.
#include <rapidjson/document.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bench/histogram_codec.hpp"
#include "bench/payload_stamp.hpp"
#include "bench/worker/omb_worker.hpp"
#include "bench/worker/worker_json.hpp"
#include "polybus/text/text.hpp"

using namespace polybus::bench;
using namespace polybus::bench::worker;

namespace {

rapidjson::Document json_of(const WorkerAnswer& answer) {
  REQUIRE(answer.status == 200);
  rapidjson::Document document;
  document.Parse(answer.body.c_str());
  REQUIRE_FALSE(document.HasParseError());
  return document;
}

std::int64_t counter(const rapidjson::Document& d, const char* key) {
  REQUIRE(d.HasMember(key));
  REQUIRE(d[key].IsInt64());
  return d[key].GetInt64();
}

HdrHistogram histogram(const rapidjson::Document& d, const char* key) {
  REQUIRE(d.HasMember(key));
  REQUIRE(d[key].IsString());
  return decode_compressed_base64(d[key].GetString());
}

std::string driver_file(const std::string& url) {
  return "name: polybus-mem\ndriverClass: polybus\nurl: " + url + "\n";
}

}  // namespace

TEST_CASE("omb worker: answers are in Jackson's pretty printing, as OMB's worker writes them") {
  CHECK(jackson_object({{"messagesSent", "0"}, {"messagesReceived", "1"}}) ==
        "{\n  \"messagesSent\" : 0,\n  \"messagesReceived\" : 1\n}");
  CHECK(jackson_string_array({"Nsq-Benchmark-0000000-U8p7Two"}) ==
        "[ \"Nsq-Benchmark-0000000-U8p7Two\" ]");
  CHECK(jackson_string_array({}) == "[ ]");
  CHECK(json_string("a\"b\n") == "\"a\\\"b\\n\"");
}

TEST_CASE("omb worker: JSON nested past the bound or broken is refused, naming the endpoint") {
  CHECK_NOTHROW(parse_json(std::string(16, '[') + std::string(16, ']'), 16, "/x"));
  CHECK_THROWS_WITH(parse_json(std::string(17, '[') + std::string(17, ']'), 16, "/x"),
                    Catch::Contains("/x: JSON nested deeper than 16"));
  // Brackets inside strings are not nesting.
  CHECK_NOTHROW(parse_json("[\"" + std::string(100, '[') + "\"]", 16, "/x"));
  CHECK_THROWS_WITH(parse_json("{\"a\":", 16, "/x"), Catch::Contains("/x: not JSON at byte"));
  // A hostile depth costs no recursion: a million brackets are refused at the 17th.
  CHECK_THROWS(parse_json(std::string(1'000'000, '['), 16, "/x"));
}

TEST_CASE(
    "omb worker: refuses as OMB's worker does: 404 for an unknown call, 500 for a failed one") {
  std::vector<std::string> logged;
  OmbWorker worker({}, [&](const std::string& line) { logged.push_back(line); });
  CHECK(worker.handle("GET", "/nothing", "").status == 404);
  CHECK(worker.handle("GET", "/nothing", "").body == "Not found");
  CHECK(worker.handle("GET", "/stop-all", "").status == 404);  // POST only
  const WorkerAnswer early = worker.handle("POST", "/create-producers", "[\"t\"]");
  CHECK(early.status == 500);
  CHECK(early.body == "Internal server error");
  REQUIRE_FALSE(logged.empty());
  CHECK_THAT(logged.back(), Catch::Contains("before /initialize-driver"));
  CHECK(worker.handle("POST", "/initialize-driver", "name: x\ndriverClass: io.Other\nurl: mem://x")
            .status == 500);
  CHECK_THAT(logged.back(), Catch::Contains("driverClass 'io.Other' is not 'polybus'"));
  CHECK(worker.handle("POST", "/initialize-driver", "name: x\ndriverClass: polybus\n").status ==
        500);
  CHECK_THAT(logged.back(), Catch::Contains("no url"));
  CHECK(worker
            .handle("POST", "/initialize-driver",
                    driver_file("mem://omb-refusals") + "ioThreads: 1000\n")
            .status == 500);
  CHECK_THAT(logged.back(), Catch::Contains("ioThreads wants an integer from 1 to 64"));
  CHECK_FALSE(worker.driver_running());

  REQUIRE(worker.handle("POST", "/initialize-driver", driver_file("mem://omb-refusals")).status ==
          200);
  CHECK(worker.handle("POST", "/initialize-driver", driver_file("mem://omb-refusals")).status ==
        500);
  CHECK_THAT(logged.back(), Catch::Contains("a driver is already running"));
  CHECK(worker.handle("POST", "/create-topics", R"({"numberOfTopics": -1})").status == 500);
  CHECK(worker.handle("POST", "/create-topics", R"({"numberOfTopics": 100001})").status == 500);
  CHECK(worker.handle("POST", "/create-producers", R"({"not": "a list"})").status == 500);
  CHECK(worker.handle("POST", "/create-consumers", R"({"topicsSubscriptions": [{"topic": 1}]})")
            .status == 500);
  CHECK(worker.handle("POST", "/start-load", R"({"payloadData": ["not base64!"]})").status == 500);
  CHECK(worker.handle("POST", "/adjust-publish-rate", "\"fast\"").status == 500);
  CHECK(worker.handle("POST", "/polybus/clock-offset", "1.5").status == 500);
  // Past a day either way: refused, so that no time arithmetic can overflow.
  CHECK(worker.handle("POST", "/polybus/clock-offset", "-9223372036854775808").status == 500);
  CHECK(worker.handle("POST", "/polybus/clock-offset", "86400000000001").status == 500);
  CHECK(worker.handle("POST", "/stop-all", "").status == 200);
  CHECK(worker.handle("POST", "/stop-all", "").status == 200);  // idempotent
  CHECK_FALSE(worker.driver_running());
}

TEST_CASE("omb worker: a send time too large for a signed 64-bit clock is no send time") {
  std::string payload(64, 'x');
  REQUIRE(stamp_payload(payload, 7, 1'700'000'000'000'000'000));
  CHECK(payload_stamp(payload) == 1'700'000'000'000'000'000);
  CHECK(payload_stamp("1 9223372036854775807 rest") == INT64_MAX);
  CHECK_FALSE(payload_stamp("1 9223372036854775808 rest"));
  CHECK_FALSE(payload_stamp("1 9999999999999999999 rest"));
}

TEST_CASE("bench stamps: written as decimal text, read back, and anything else is no stamp") {
  char head[kLongestStamp];
  auto text = [&](std::uint64_t sequence, std::int64_t stamp) {
    return std::string(head, format_stamp(head, sequence, stamp));
  };
  CHECK(text(0, 1) == "0 1 ");
  CHECK(text(7, 1'700'000'000'123'456'789) == "7 1700000000123456789 ");
  CHECK(text(100'000'000, 99'999'999) == "100000000 99999999 ");
  CHECK(text(1234567890123456789, INT64_MAX) == "1234567890123456789 9223372036854775807 ");
  CHECK(text(18446744073709551615ULL, 5).size() <= kLongestStamp);
  CHECK(text(3, -5) == "3 0 ");  // no reader takes a stamp of 0
  CHECK_FALSE(payload_stamp(text(3, -5)));
  for (std::int64_t stamp : {std::int64_t{1}, std::int64_t{10}, std::int64_t{99}, std::int64_t{100},
                             std::int64_t{123'456'789'012}, INT64_MAX})
    CHECK(payload_stamp(text(42, stamp) + "filler") == stamp);
  CHECK_FALSE(payload_stamp(""));
  CHECK_FALSE(payload_stamp("12"));
  CHECK_FALSE(payload_stamp("12 "));
  CHECK_FALSE(payload_stamp("12 34"));  // no space after the stamp
  CHECK_FALSE(payload_stamp(" 34 "));
  CHECK_FALSE(payload_stamp("12  34 "));
  CHECK_FALSE(payload_stamp("1x 34 "));
  CHECK_FALSE(payload_stamp("12345678901234567890 34 "));  // a 20-digit sequence
  CHECK(payload_stamp("1234567890123456789 34 ") == 34);
  CHECK_FALSE(payload_stamp("1 12345678901234567890 "));  // a 20-digit stamp
}

// Each byte of a stamp, at every place, is replaced by the bytes next to the digits and by
// others, and cut off there too: the reader must agree with a plain reading of the same text
// (digits up to 19, a space, digits up to 19, a space, a value from 1 to INT64_MAX).
TEST_CASE("bench stamps: a byte other than a digit anywhere in either number is seen") {
  auto plain = [](std::string_view text) -> std::optional<std::int64_t> {
    std::size_t at = 0, digits = 0;
    for (; at < text.size() && digits < 19 && text[at] >= '0' && text[at] <= '9'; ++at) ++digits;
    if (digits == 0 || at == text.size() || text[at] != ' ') return std::nullopt;
    ++at;
    std::uint64_t stamp = 0;
    for (digits = 0; at < text.size() && digits < 19 && text[at] >= '0' && text[at] <= '9';
         ++at, ++digits)
      stamp = stamp * 10 + static_cast<std::uint64_t>(text[at] - '0');
    if (digits == 0 || at == text.size() || text[at] != ' ' || stamp == 0 ||
        stamp > static_cast<std::uint64_t>(INT64_MAX))
      return std::nullopt;
    return static_cast<std::int64_t>(stamp);
  };
  const std::string bases[] = {"123456789012 1700000000123456789 filler",
                               "1234567890123456789 1234567890123456789 ", "1 2 ",
                               "12345678 87654321 ", "123456789 9876543210 x"};
  const char replacements[] = {'/', ':', ' ', 'a', '\0', '\x3f', '\x40', '\xff', '\xba', '\x36'};
  std::size_t compared = 0;
  for (const std::string& base : bases) {
    REQUIRE(payload_stamp(base) == plain(base));
    for (std::size_t i = 0; i < base.size(); ++i)
      for (char c : replacements) {
        std::string text = base;
        text[i] = c;
        INFO(text);
        CHECK(payload_stamp(text) == plain(text));
        CHECK(payload_stamp(std::string_view(text).substr(0, i)) == plain(text.substr(0, i)));
        ++compared;
      }
  }
  CHECK(compared > 1000);
}

// Every number of digits, the edges around each power of ten, and a spread of others, written as
// std::to_string writes them.
TEST_CASE("bench stamps: every length of number is written as std::to_string writes it") {
  std::vector<std::uint64_t> values = {0, 1, 9, 10, 99, 100, 18446744073709551615ULL};
  for (std::uint64_t p = 1; p <= 1'000'000'000'000'000'000ULL; p *= 10)
    for (std::uint64_t v : {p - 1, p, p + 1, 2 * p - 1, 9 * p + (p - 1)}) values.push_back(v);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(x >> (i % 64));
  }
  char head[kLongestStamp];
  for (std::uint64_t v : values) {
    INFO(v);
    const std::string expected = std::to_string(v) + " " +
                                 std::to_string(v > static_cast<std::uint64_t>(INT64_MAX) ? 0 : v) +
                                 " ";
    const std::size_t n = format_stamp(
        head, v, v > static_cast<std::uint64_t>(INT64_MAX) ? 0 : static_cast<std::int64_t>(v));
    REQUIRE(n <= kLongestStamp);
    CHECK(std::string(head, n) == expected);
  }
}

TEST_CASE("omb worker: polybus's clock endpoints give the worker's clock and take its offset") {
  OmbWorker skewed({}, {}, std::chrono::seconds(-5));
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto clock = json_of(skewed.handle("GET", "/polybus/clock", ""));
  REQUIRE(clock["wallNanos"].IsInt64());
  const double behind_s = static_cast<double>(now - clock["wallNanos"].GetInt64()) / 1e9;
  CHECK(behind_s > 4.0);
  CHECK(behind_s < 6.0);
  CHECK(skewed.handle("POST", "/polybus/clock-offset", "-5000000000").status == 200);
  CHECK(skewed.handle("POST", "/polybus/clock", "").status == 404);  // GET only
}

TEST_CASE("omb worker: a driver on mem:// counts and measures every message as OMB reads them") {
  OmbWorker worker;
  REQUIRE(worker.handle("POST", "/initialize-driver", driver_file("mem://omb-worker-run")).status ==
          200);
  const auto topics = json_of(worker.handle(
      "POST", "/create-topics", R"({"numberOfTopics":2,"numberOfPartitionsPerTopic":1})"));
  REQUIRE(topics.IsArray());
  REQUIRE(topics.Size() == 2);
  const std::string topic = topics[0].GetString();
  CHECK_THAT(topic, Catch::StartsWith("polybus-benchmark-0000000-"));
  CHECK(topic.size() == std::string("polybus-benchmark-0000000-").size() + 7);
  CHECK(std::string(topics[1].GetString()).rfind("polybus-benchmark-0000001-", 0) == 0);

  REQUIRE(worker
              .handle("POST", "/create-consumers",
                      R"({"topicsSubscriptions":[{"topic":")" + topic +
                          R"(","subscription":"sub-000-AAAAAAA"}]})")
              .status == 200);
  REQUIRE(worker.handle("POST", "/create-producers", "[\"" + topic + "\"]").status == 200);
  REQUIRE(worker.handle("POST", "/probe-producers", "").status == 200);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto counters = json_of(worker.handle("GET", "/counters-stats", ""));
  while (counter(counters, "messagesReceived") < 1 || counter(counters, "messagesSent") < 1) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polls, as OMB's coordinator
    counters = json_of(worker.handle("GET", "/counters-stats", ""));
  }
  CHECK(counter(counters, "messagesSent") == 1);  // the probe: in the total only
  auto period = json_of(worker.handle("GET", "/period-stats", ""));
  CHECK(counter(period, "messagesSent") == 0);
  CHECK(counter(period, "totalMessagesSent") == 1);
  CHECK(counter(period, "messagesReceived") == 1);
  CHECK(histogram(period, "endToEndLatency").total_count() == 0);  // 10 bytes carry no send time

  std::string payload(1024, 'x');
  std::string encoded;
  polybus::text::append_base64(encoded, payload);
  REQUIRE(worker
              .handle("POST", "/start-load",
                      R"({"payloadData":[")" + encoded +
                          R"("],"publishRate":5000.0,"keyDistributorType":"NO_KEY"})")
              .status == 200);
  REQUIRE(worker.handle("POST", "/adjust-publish-rate", "20000.0").status == 200);
  REQUIRE(worker.handle("POST", "/reset-stats", "").status == 200);
  // OMB's worker resets only the histograms here, so what was sent between start-load and the
  // reset is in the next period's counters but not in its histograms: that period is read and
  // bounded, and the periods after it must agree exactly.
  period = json_of(worker.handle("GET", "/period-stats", ""));
  CHECK(histogram(period, "publishLatency").total_count() <= counter(period, "messagesSent"));
  CHECK(histogram(period, "endToEndLatency").total_count() <= counter(period, "messagesReceived"));
  std::int64_t sent = 0, received = 0;
  while (sent < 500 || received < 500) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    period = json_of(worker.handle("GET", "/period-stats", ""));
    // Each message's count and latency are read together.
    CHECK(histogram(period, "publishLatency").total_count() == counter(period, "messagesSent"));
    CHECK(histogram(period, "endToEndLatency").total_count() ==
          counter(period, "messagesReceived"));
    CHECK(counter(period, "bytesSent") == 1024 * counter(period, "messagesSent"));
    CHECK(counter(period, "messageSendErrors") == 0);
    sent += counter(period, "messagesSent");
    received += counter(period, "messagesReceived");
  }
  const HdrHistogram publish = histogram(period, "publishLatency");
  CHECK(publish.highest() == 60'000'000);  // the range OMB's coordinator adds into
  REQUIRE(worker.handle("POST", "/pause-consumers", "").status == 200);
  REQUIRE(worker.handle("POST", "/resume-consumers", "").status == 200);

  const auto cumulative = json_of(worker.handle("GET", "/cumulative-latencies", ""));
  CHECK(histogram(cumulative, "publishLatency").total_count() >= sent);
  CHECK(histogram(cumulative, "endToEndLatency").highest() == 43'200'000'000LL);
  const auto emptied = json_of(worker.handle("GET", "/cumulative-latencies", ""));
  CHECK(histogram(emptied, "publishLatency").total_count() < sent);  // reset by the read

  REQUIRE(worker.handle("POST", "/stop-all", "").status == 200);
  counters = json_of(worker.handle("GET", "/counters-stats", ""));
  CHECK(counter(counters, "messagesSent") == 0);
  CHECK(counter(counters, "messagesReceived") == 0);
  // A driver again after stop-all.
  CHECK(worker.handle("POST", "/initialize-driver", driver_file("mem://omb-worker-run")).status ==
        200);
}
