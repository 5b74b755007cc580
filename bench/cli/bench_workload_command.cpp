// SPDX-License-Identifier: Apache-2.0
// bench --workload: runs an OpenMessaging Benchmark workload file against each URL in turn and
// writes OMB's result JSON, an HdrHistogram interval log and a report of the windows.
// bench merge: the percentiles of several HdrHistogram interval logs added together.
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "bench/cli/bench_command.hpp"
#include "bench/coordinator/distributed_run.hpp"
#include "bench/histogram_log.hpp"
#include "bench/workload_report.hpp"
#include "bench/workload_run.hpp"
#include "bench_targets.hpp"
#include "polybus/polybus.hpp"
#include "polybus/text/text.hpp"
#include "polybus/tools/args.hpp"

namespace polybus::cli {
namespace {

const char* kWorkloadUsage =
    R"(usage: polybus bench --workload FILE.yaml URL... [--duration D] [--warmup D]
       polybus bench --workload FILE.yaml (URL | --driver FILE.yaml) --workers URL,URL...
                     [--result FILE.json] [--histogram-log FILE.hlog] [--window-seconds S]
                     [--report FILE.svg|FILE.html] [--max-payload BYTES] [--max-in-flight N]
                     [--backlog BYTES]
       polybus bench merge FILE.hlog... 
Runs an OpenMessaging Benchmark workload (its workloads/*.yaml, every field of OMB's Workload)
against each URL in turn (broker:NAME for an in-process test broker), as OMB runs it against a
driver: the topics, subscriptions, consumers and producers it asks for, a warm-up whose figures
are dropped, then the test in windows of --window-seconds (default 10): publish, error and
consume rates, backlog, publish latency, publish delay (how late each send was against its
schedule) and end-to-end latency. producerRate 0 searches for the highest rate at which the
backlog stays bounded (OMB's rate controller). A field that does not map onto a scheme is said on
the first line and in the result. payloadFile is read relative to the working directory, as OMB
reads it from its repository's root.
  --duration D, --warmup D   replace the file's minutes (10s, 2m, 1h, 500ms; a bare number is
                             seconds)
  --result FILE.json         OMB's result format (every field of its TestResult); with several
                             URLs, FILE-1.json, FILE-2.json ...
  --histogram-log FILE.hlog  HdrHistogram's interval log (tags publish, publish-delay,
                             end-to-end; microseconds), for `polybus bench merge` and
                             HdrHistogram's own tools; numbered like --result with several URLs
  --report FILE.svg|.html    rates and p99 latencies per window, one line per URL
  --max-payload BYTES        the largest messageSize or payload file accepted (default 64 MiB)
  --max-in-flight N          publishes in flight per producer (default 1000)
  --backlog BYTES            replaces consumerBacklogSizeGB: the backlog built with the consumers
                             paused, then drained, before the test's minutes (as OMB's whole
                             gigabytes are more than a short run wants)
  --workers URL,URL...        runs the workload over OMB workers (polybus bench worker, or
                             OMB's own) as OMB's coordinator does: the first half (rounded
                             down) produce, the rest consume; counters summed and histograms
                             merged per window. The broker: one URL every worker reaches (the
                             driver file polybus's workers get is made from it), or
  --driver FILE.yaml         a driver file sent as is (OMB's driver files, for its workers)
  --call-timeout S           the bound on each call to a worker (default 60 s); a worker that
                             refuses, fails or stops answering ends the run, named with its
                             endpoint, and every worker is sent /stop-all
Ctrl-C ends the run: what was measured so far is written, marked incomplete.
merge prints, for each tag of the logs, the percentiles of all their intervals together (logs
from several machines or processes of one split workload), and a JSON line per tag.
)";

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

// Ctrl-C and SIGTERM set g_interrupted: the run ends, writing what it measured.
void interrupt_ends_the_run() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::chrono::milliseconds parse_duration(const std::string& flag, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string unit = text.substr(digits);
  std::uint64_t scale = unit.empty() || unit == "s" ? 1000
                        : unit == "ms"              ? 1
                        : unit == "m"               ? 60'000
                        : unit == "h"               ? 3'600'000
                                                    : 0;
  if (digits == 0 || digits > 9 || scale == 0)
    throw UsageError("--" + flag + " wants a duration such as 10s, 2m or 500ms, not '" + text +
                     "'");
  const std::uint64_t ms = std::stoull(text.substr(0, digits)) * scale;
  if (ms > 7ull * 24 * 3'600'000) throw UsageError("--" + flag + " " + text + " is over a week");
  return std::chrono::milliseconds(ms);
}

// FILE.ext as given for one URL; FILE-N.ext for the Nth of several.
std::string numbered(const std::string& path, std::size_t index, std::size_t count) {
  if (count == 1) return path;
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string suffix = "-" + std::to_string(index + 1);
  return has_ext ? path.substr(0, dot) + suffix + path.substr(dot) : path + suffix;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

// --workers: the workload over OMB workers, as OMB's coordinator runs it.
int run_over_workers(const Args& args, const bench::Workload& workload,
                     const bench::WorkloadRunSettings& base) {
  if (args.has("max-in-flight") || args.has("report"))
    throw UsageError(
        "--max-in-flight and --report do not go with --workers (the driver file "
        "sets maxInFlightPerProducer)");
  bench::coordinator::DistributedSettings s;
  for (std::string rest = *args.value("workers"); !rest.empty();) {
    const auto comma = rest.find(',');
    s.workers.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  if (s.workers.size() < 2)
    throw UsageError(
        "--workers wants two worker URLs or more (http://HOST:PORT,...): half "
        "produce, the rest consume");
  std::vector<std::unique_ptr<testing::TestBroker>> brokers;
  if (auto path = args.value("driver")) {
    if (!args.positional().empty()) throw UsageError("--driver names the broker: no URL beside it");
    std::ifstream in(*path, std::ios::binary);
    if (!in) throw UsageError(*path + ": cannot be read");
    s.driver_file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (s.driver_file.size() > 64 * 1024) throw UsageError(*path + ": over 64 KiB");
    try {
      const YAML::Node root = YAML::Load(s.driver_file);
      if (root.IsMap() && root["name"] && root["name"].IsScalar()) s.driver = root["name"].Scalar();
      if (root.IsMap() && root["url"] && root["url"].IsScalar()) s.url = root["url"].Scalar();
    } catch (const YAML::Exception& e) {
      throw UsageError(*path + ": not YAML: " + e.what());
    }
    if (s.driver.empty()) throw UsageError(*path + ": no name (OMB's driver files have one)");
  } else {
    if (args.positional().size() != 1)
      throw UsageError("--workers takes one URL (the broker every worker reaches) or --driver");
    const Target target = resolve_target(args.positional()[0], brokers);
    s.url = target.url;
    s.driver = "polybus-" + target.url.substr(0, target.url.find(':'));
    s.driver_file = "name: " + s.driver + "\ndriverClass: polybus\nurl: " + target.url + "\n";
  }
  s.window = base.window;
  s.call_timeout = std::chrono::seconds(args.number("call-timeout", 60, 1, 3600));
  s.stop = &g_interrupted;
  s.progress = [](const std::string& line) {
    std::printf("workers %s\n", line.c_str());
    std::fflush(stdout);
  };
  std::printf("workload \"%s\" (%s) | driver %s over %zu workers, the first %zu producing\n",
              workload.name.c_str(), args.value("workload")->c_str(), s.driver.c_str(),
              s.workers.size(), s.workers.size() / 2);
  std::fflush(stdout);
  interrupt_ends_the_run();
  std::ofstream log;
  if (auto path = args.value("histogram-log")) {
    log.open(*path, std::ios::binary);
    if (!log) throw std::runtime_error("cannot write " + *path);
    s.histogram_log = &log;
  }
  const bench::OmbResult r = bench::coordinator::run_distributed(workload, s);
  std::printf("%s", bench::summary_lines(r).c_str());
  if (auto path = args.value("result")) write_file(*path, bench::to_json(r));
  if (g_interrupted.load()) std::fprintf(stderr, "interrupted: the result is marked incomplete\n");
  return r.publish_errors > 0 || !r.complete ? 1 : 0;
}

}  // namespace

int run_bench_workload(const Argv& argv) {
  Args args(argv, {"workload", "duration", "warmup", "result", "histogram-log", "window-seconds",
                   "report", "max-payload", "max-in-flight", "backlog", "workers", "driver",
                   "call-timeout"});
  if (args.help()) return std::cout << kWorkloadUsage, 0;
  if (args.positional().empty() && !args.has("driver"))
    throw UsageError("--workload needs one URL or more (or, with --workers, --driver FILE)");
  const std::string file = *args.value("workload");
  bench::WorkloadLimits limits;
  limits.max_payload = args.number("max-payload", limits.max_payload, 1, 1ull << 30);
  bench::Workload workload;
  try {
    workload = bench::read_workload(file, limits);
  } catch (const bench::WorkloadError& e) {
    throw UsageError(e.what());
  }
  if (auto d = args.value("duration"))
    workload.test_duration_override = parse_duration("duration", *d);
  if (auto d = args.value("warmup"))
    workload.warmup_duration_override = parse_duration("warmup", *d);
  if (args.value("backlog")) {
    workload.consumer_backlog_bytes_override = args.number("backlog", 0, 1, 1ull << 40);
    if (workload.producer_rate == 0)
      throw UsageError(file +
                       ": --backlog with producerRate 0: the highest sustainable rate cannot be "
                       "searched for while a backlog builds");
  }
  if (workload.test_duration().count() == 0)
    throw UsageError(file +
                     ": testDurationMinutes is 0 and no --duration: nothing would be measured");
  bench::WorkloadRunSettings base;
  base.window = std::chrono::seconds(args.number("window-seconds", 10, 1, 3600));
  base.max_in_flight_per_producer =
      static_cast<std::uint32_t>(args.number("max-in-flight", 1000, 1, 1'000'000));
  const auto report = args.value("report");
  if (report && !(report->size() > 4 &&
                  (report->substr(report->size() - 4) == ".svg" ||
                   (report->size() > 5 && report->substr(report->size() - 5) == ".html"))))
    throw UsageError("--report wants a FILE.svg or FILE.html, got '" + *report + "'");

  if (args.has("workers")) return run_over_workers(args, workload, base);
  if (args.has("driver") || args.has("call-timeout"))
    throw UsageError("--driver and --call-timeout go with --workers");

  std::vector<std::unique_ptr<testing::TestBroker>> brokers;
  std::vector<Target> targets;
  for (const auto& given : args.positional()) targets.push_back(resolve_target(given, brokers));

  // The first line: what of the workload does not map onto each scheme.
  std::vector<std::string> mapping;
  for (const auto& target : targets) {
    Client probe = polybus::connect(target.url);
    const Capabilities caps = probe.capabilities();
    const auto unmapped =
        bench::unmapped_fields(workload, {probe.scheme(), caps.publish && caps.subscribe,
                                          caps.consumer_groups, caps.publish_confirmed});
    mapping.push_back(
        target.label + ": " +
        (unmapped.empty() ? "every field maps" : "does not map: " + join(unmapped, "; ")));
    probe.close_sync(std::chrono::seconds(5));
  }
  std::printf("workload \"%s\" (%s) | %s\n", workload.name.c_str(), file.c_str(),
              join(mapping, " | ").c_str());
  std::fflush(stdout);

  interrupt_ends_the_run();

  std::vector<bench::OmbResult> results;
  bool failed = false;
  for (std::size_t i = 0; i < targets.size() && !g_interrupted.load(); ++i) {
    bench::WorkloadRunSettings s = base;
    s.url = targets[i].url;
    s.driver = targets[i].label;
    s.stop = &g_interrupted;
    s.progress = [&](const std::string& line) {
      std::printf("%s %s\n", targets[i].label.c_str(), line.c_str());
      std::fflush(stdout);
    };
    std::ofstream log;
    if (auto path = args.value("histogram-log")) {
      log.open(numbered(*path, i, targets.size()), std::ios::binary);
      if (!log) throw std::runtime_error("cannot write " + numbered(*path, i, targets.size()));
      s.histogram_log = &log;
    }
    bench::OmbResult r = bench::run_workload(workload, s);
    failed = failed || r.publish_errors > 0 || !r.complete;
    std::printf("%s", bench::summary_lines(r).c_str());
    if (auto path = args.value("result"))
      write_file(numbered(*path, i, targets.size()), bench::to_json(r));
    results.push_back(std::move(r));
  }
  if (report) {
    const bool html = report->substr(report->size() - 5) == ".html";
    write_file(*report, html ? bench::workload_html(results) : bench::workload_svg(results));
    std::fprintf(stderr, "report: %s\n", report->c_str());
  }
  if (g_interrupted.load())
    std::fprintf(stderr, "interrupted: the results are marked incomplete\n");
  return failed ? 1 : 0;
}

int run_bench_merge(const Argv& argv) {
  Args args(argv, {});
  if (args.help()) return std::cout << kWorkloadUsage, 0;
  if (args.positional().empty()) throw UsageError("merge needs one FILE.hlog or more");
  bench::MergedLogs merged;
  for (const auto& path : args.positional()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot be read");
    bench::merge_histogram_log(in, path, merged);
  }
  std::printf("%llu interval(s) from %zu log(s); values in microseconds\n",
              static_cast<unsigned long long>(merged.intervals), args.positional().size());
  // Each tag's figures once, printed as a line for people, then as JSON lines for machines.
  struct Figures {
    std::string tag;
    long long count, p50, p75, p90, p95, p99, p999, p9999, max;
    double mean;
  };
  std::vector<Figures> figures;
  for (const auto& [tag, h] : merged.by_tag) {
    auto at = [&h = h](double p) { return static_cast<long long>(h.value_at_percentile(p)); };
    figures.push_back({tag, static_cast<long long>(h.total_count()), at(50), at(75), at(90), at(95),
                       at(99), at(99.9), at(99.99), static_cast<long long>(h.max()), h.mean()});
  }
  for (const auto& f : figures)
    std::printf(
        "%s: %lld values, mean %.1f, p50 %lld, p75 %lld, p90 %lld, p95 %lld, p99 %lld, "
        "p99.9 %lld, p99.99 %lld, max %lld\n",
        f.tag.empty() ? "(untagged)" : f.tag.c_str(), f.count, f.mean, f.p50, f.p75, f.p90, f.p95,
        f.p99, f.p999, f.p9999, f.max);
  for (const auto& f : figures)
    std::printf(
        "{\"tag\":%s,\"count\":%lld,\"mean\":%.3f,\"p50\":%lld,\"p75\":%lld,\"p90\":%lld,"
        "\"p95\":%lld,\"p99\":%lld,\"p999\":%lld,\"p9999\":%lld,\"max\":%lld}\n",
        text::json_quote(f.tag).c_str(), f.count, f.mean, f.p50, f.p75, f.p90, f.p95, f.p99, f.p999,
        f.p9999, f.max);
  return 0;
}

}  // namespace polybus::cli
