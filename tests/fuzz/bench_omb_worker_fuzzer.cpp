// SPDX-License-Identifier: Apache-2.0
// OMB's worker protocol as `polybus bench worker` answers it (bench/worker/omb_worker.hpp): any
// body to any endpoint, from a coordinator nobody vouches for.
// Input: [endpoint][body]: the first byte picks the endpoint (modulo their number), the rest is
// the body, its high bit the worker: one with no driver (every call before /initialize-driver),
// or one with a driver on mem:// for the endpoints whose body makes no client (/create-topics,
// /start-load, /adjust-publish-rate, /polybus/clock-offset, the GETs...). Then the JSON reader
// on its own with its depth bound.
// Checks: every answer is 200, 404 or 500 (OMB's worker's); a 200 of a GET is a JSON object; a
// 200 of /create-topics is an array of no more topics than the limit; the depth bound holds
// (what parses nests no deeper than allowed); nothing else is thrown.
#include <rapidjson/document.h>

#include "bench/worker/omb_worker.hpp"
#include "bench/worker/worker_json.hpp"
#include "fuzz_util.hpp"
#include "polybus/all.hpp"

using namespace polybus::bench::worker;

namespace {

struct Endpoint {
  const char* method;
  const char* path;
};
constexpr Endpoint kEndpoints[] = {
    {"POST", "/create-topics"},
    {"POST", "/start-load"},
    {"POST", "/adjust-publish-rate"},
    {"POST", "/polybus/clock-offset"},
    {"GET", "/period-stats"},
    {"GET", "/cumulative-latencies"},
    {"GET", "/counters-stats"},
    {"POST", "/reset-stats"},
    {"POST", "/pause-consumers"},
    {"POST", "/resume-consumers"},
    {"POST", "/probe-producers"},
    {"POST", "/create-producers"},
    {"POST", "/create-consumers"},
    {"POST", "/stop-all"},
    {"GET", "/nothing"},
    {"PUT", "/stop-all"},
};
constexpr std::size_t kWithDriver = 11;  // the first ones: no client made from their body

std::size_t depth_of(const rapidjson::Value& v) {
  std::size_t deepest = 0;
  if (v.IsArray())
    for (const auto& item : v.GetArray()) deepest = std::max(deepest, depth_of(item));
  else if (v.IsObject())
    for (const auto& m : v.GetObject()) deepest = std::max(deepest, depth_of(m.value));
  else
    return 0;
  return deepest + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static OmbWorker without_driver;
  static const bool registered = (polybus::register_all_schemes(), true);
  static std::string why;
  static OmbWorker with_driver({}, [](const std::string& line) { why = line; });
  static const bool started = with_driver
                                  .handle("POST", "/initialize-driver",
                                          "name: fuzz\ndriverClass: polybus\nurl: mem://fuzz\n")
                                  .status == 200;
  if (!started) std::fprintf(stderr, "no driver on mem://: %s\n", why.c_str());
  FUZZ_CHECK(registered && started);
  if (size == 0) return 0;
  const std::size_t pick = data[0] % std::size(kEndpoints);
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Endpoint& e = kEndpoints[pick];
  // /initialize-driver is left out: a body naming a URL would connect to it (the driver file's
  // reader is bench_workload_fuzzer's yaml-cpp and a few keys).
  OmbWorker& worker = pick < kWithDriver && (data[0] & 0x80) ? with_driver : without_driver;
  const WorkerAnswer answer = worker.handle(e.method, e.path, body);
  FUZZ_CHECK(answer.status == 200 || answer.status == 404 || answer.status == 500);
  if (answer.status == 200 && std::string_view(e.method) == "GET") {
    rapidjson::Document d;
    d.Parse(answer.body.c_str());
    FUZZ_CHECK(!d.HasParseError() && d.IsObject());
  }
  if (answer.status == 200 && std::string_view(e.path) == "/create-topics") {
    rapidjson::Document d;
    d.Parse(answer.body.c_str());
    FUZZ_CHECK(!d.HasParseError() && d.IsArray() && d.Size() <= WorkerLimits{}.max_topics);
  }
  FUZZ_CHECK(!without_driver.driver_running());

  try {
    const auto doc = parse_json(body, 8, "/fuzz");
    FUZZ_CHECK(depth_of(doc) <= 8);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
