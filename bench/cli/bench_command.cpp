// SPDX-License-Identifier: Apache-2.0
// bench: publish N messages from P publishers and consume them with S subscribers (or, for
// request/reply-only schemes, N round trips to S responders), then report throughput, latency
// and the CPU time of this process. The last line is one JSON object.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>

#include "bench/cli/bench_command.hpp"
#include "bench_report.hpp"
#include "bench_run.hpp"
#include "bench_targets.hpp"
#include "polybus/polybus.hpp"
#include "polybus/testing.hpp"
#include "polybus/text/text.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/metrics_endpoint.hpp"

namespace polybus::cli {
namespace {

const char* kBenchUsage = R"(usage: polybus bench URL [--topic T] [--messages N] [--size B]
                           [--publishers P] [--subscribers S] [--window W] [--batch K]
                           [--concurrency C] [--group G] [--from OFFSET] [--rate R]
                           [--timeout S] [--metrics HOST:PORT]
                           [--batch-consume N [--batch-wait MS]] [--middleware M,...]
                           [--requests] [--no-latency]
       polybus bench --compare URL URL... [--rounds R] [--report FILE.svg|FILE.html] [same flags]
Publishes N messages of B bytes (default 100000 x 200) from P publishers (default 1), consumes
them with S subscribers (default 1; one consumer group where the scheme has them) and reports
msgs/s, MB/s, publish-to-receive latency p50/p99/p99.9, this process's CPU time and its heap
allocations (operator new) per message. Schemes that only do request/reply run N round trips to
S responders instead, as --requests makes any scheme with request/reply do. A URL may be
broker:NAME[?OPTIONS]: the in-process test broker NAME (polybus broker --help lists them),
started in this process for the run, with the client options given (broker:nsq?envelope=
cloudevents).
The topic: a run that publishes and consumes uses a new one (bench-XXXXXXXX) unless --topic
names it, so that the consumer group it leaves behind (an NSQ channel is kept) never collects
a later run's messages; publish-only and consume-only runs default to "bench", to meet.
  --subscribers 0   publish only: throughput of completed publishes, latency from publish to
                    its completion (broker-confirmed where the scheme confirms).
  --publishers 0    consume only: drains N messages that are already there (another process's,
                    or an earlier --subscribers 0 run's: same --topic, and --group G on brokers
                    with groups, --from OFFSET on Figg); payloads polybus did not write are
                    counted but give no latency.
--window W keeps at most W publishes in flight per publisher (default 1000). --batch K
publishes K messages per publish_batch (NSQ's MPUB). --batch-consume N consumes in batches of
up to N (subscribe_batch; --batch-wait MS, default 100, bounds a batch's wait; max_in_flight is
raised to N where below it). --middleware puts each named one around every handler, outermost
first (pass: a step of one's own that calls next; timeout 10 min; throttle at 1e9/s, which never
waits; circuit_breaker; deduplicate), for what each costs a message. --concurrency C runs C handlers at once per
subscriber or responder (MemoDB: C workers on its socket; default: the URL's
handler_concurrency option, 1 unless set). --rate R offers R messages per second (all
publishers together) instead of flooding: latency is then measured from when each message was
due, so a stall counts in it. --no-latency sends payloads without a send time and times
nothing: no clock read or latency record per message, the work of a bench that measures none
(figg-bench, bench_writer), for a comparison of CPU per message. --metrics HOST:PORT serves the metrics of every client of the run
at http://HOST:PORT/metrics while it runs. Ends with one JSON line.
--compare runs the same workload on each URL, R rounds (default 3) in alternating order so
machine noise spreads evenly (each run on a topic of its own, except with --publishers 0), then
prints one table of medians with their spread, a JSON line per run and one per URL; --report
draws throughput bars and latency percentile curves into an SVG file (or an HTML page with it).
On a terminal, a progress line per second (one per round with --compare) goes to standard error.
)";

std::string json_line(const BenchSettings& s, const BenchResult& r, const std::string& extra) {
  char line[2048];
  std::snprintf(
      line, sizeof line,
      "{%s\"scheme\":\"%s\",\"mode\":\"%s\",\"messages\":%llu,\"published\":%llu,"
      "\"delivered\":%llu,\"size\":%llu,\"publishers\":%llu,\"subscribers\":%llu,"
      "\"concurrency\":%llu,\"rate\":%.1f,\"seconds\":%.6f,\"msgs_per_sec\":%.1f,"
      "\"mb_per_sec\":%.3f,\"latency\":\"%s\",\"latency_samples\":%llu,\"p50_us\":%llu,"
      "\"p90_us\":%llu,\"p99_us\":%llu,\"p999_us\":%llu,\"p9999_us\":%llu,\"max_us\":%llu,"
      "\"cpu_seconds\":%.6f,\"cpu_us_per_msg\":%.3f,\"allocations\":%llu,"
      "\"allocs_per_msg\":%.3f,\"publish_seconds\":%.6f,\"publish_completion\":\"%s\","
      "\"failures\":%llu",
      extra.c_str(), r.scheme.c_str(), mode_name(r.mode),
      static_cast<unsigned long long>(r.measured), static_cast<unsigned long long>(r.published),
      static_cast<unsigned long long>(r.delivered), static_cast<unsigned long long>(s.size),
      static_cast<unsigned long long>(s.publishers), static_cast<unsigned long long>(s.subscribers),
      static_cast<unsigned long long>(s.concurrency), s.rate, r.seconds, r.msgs_per_sec,
      r.mb_per_sec, r.latency_kind, static_cast<unsigned long long>(r.latency_samples),
      static_cast<unsigned long long>(r.latency_at(50)),
      static_cast<unsigned long long>(r.latency_at(90)),
      static_cast<unsigned long long>(r.latency_at(99)),
      static_cast<unsigned long long>(r.latency_at(99.9)),
      static_cast<unsigned long long>(r.latency_at(99.99)),
      static_cast<unsigned long long>(r.latency_at(100)), r.cpu_seconds, r.cpu_us_per_msg,
      static_cast<unsigned long long>(r.allocations), r.allocs_per_msg, r.publish_seconds,
      r.publish_confirmed ? "confirmed" : "written", static_cast<unsigned long long>(r.failures));
  std::string out = line;
  if (!r.first_failure.empty()) out += ",\"first_failure\":" + text::json_quote(r.first_failure);
  return out + "}";
}

void print_run(const BenchSettings& s, const BenchResult& r, const Target& target) {
  std::printf("%s %s: %llu published, %llu delivered, %llu B each, %llu publisher(s), %llu %s\n",
              r.scheme.c_str(), mode_name(r.mode), static_cast<unsigned long long>(r.published),
              static_cast<unsigned long long>(r.delivered), static_cast<unsigned long long>(s.size),
              static_cast<unsigned long long>(s.publishers),
              static_cast<unsigned long long>(s.subscribers),
              r.mode == BenchMode::request ? "responder(s)" : "subscriber(s)");
  std::printf("  a completed publish is %s; %s\n",
              r.publish_confirmed ? "broker-confirmed" : "only written",
              target.in_process ? "an in-process test broker" : "an external broker");
  std::printf("  throughput: %.0f msgs/s, %.2f MB/s over %.3f s", r.msgs_per_sec, r.mb_per_sec,
              r.seconds);
  if (r.mode == BenchMode::pubsub)
    std::printf(" (publishing took %.3f s: %.0f msgs/s)", r.publish_seconds,
                s.messages / r.publish_seconds);
  if (s.rate > 0) std::printf(" at %.0f msgs/s offered", s.rate);
  std::printf("\n");
  if (r.latency_samples)
    std::printf("  latency (%s%s): p50 %llu us, p99 %llu us, p99.9 %llu us, max %llu us\n",
                r.latency_kind, s.rate > 0 ? ", from when each was due" : "",
                static_cast<unsigned long long>(r.latency_at(50)),
                static_cast<unsigned long long>(r.latency_at(99)),
                static_cast<unsigned long long>(r.latency_at(99.9)),
                static_cast<unsigned long long>(r.latency_at(100)));
  else
    std::printf("  latency: none (%s)\n",
                s.latency ? "no payload carried a bench send time" : "--no-latency");
  std::printf("  cpu: %.3f s in this process, %.2f us per message; %.2f allocations per message\n",
              r.cpu_seconds, r.cpu_us_per_msg, r.allocs_per_msg);
  if (r.failures || r.timed_out)
    std::printf("  failures: %llu publish/request error(s)%s%s%s\n",
                static_cast<unsigned long long>(r.failures),
                r.timed_out ? ", timed out before every message arrived" : "",
                r.first_failure.empty() ? "" : "; the first: ", r.first_failure.c_str());
}

}  // namespace

// broker:NAME starts an in-process test broker (kept in `brokers` until the command ends).
Target resolve_target(const std::string& given,
                      std::vector<std::unique_ptr<testing::TestBroker>>& brokers) {
  const std::string prefix = "broker:";
  if (given.rfind(prefix, 0) != 0) return {given, given, given.rfind("mem://", 0) == 0};
  // broker:NAME?OPTIONS: the client's options go on the broker's URL.
  const std::string rest = given.substr(prefix.size());
  const std::string name = rest.substr(0, rest.find('?'));
  const std::string options = name.size() < rest.size() ? rest.substr(name.size()) : "";
  for (const auto& factory : testing::test_brokers()) {
    if (factory.name != name) continue;
    brokers.push_back(factory.start());
    const std::string url = brokers.back()->url();
    // Its plain URL, as `polybus broker` prints it, with the options given.
    return {given, url.substr(0, url.find('?')) + options, true};
  }
  std::string known;
  for (const auto& factory : testing::test_brokers()) known += " " + factory.name;
  throw UsageError("no in-process broker '" + name + "'; known:" + known);
}

namespace {

// --middleware's comma-separated names, each checked.
std::vector<std::string> middleware_names(const std::string& list) {
  static const std::set<std::string> kKnown{"pass", "timeout", "throttle", "circuit_breaker",
                                            "deduplicate"};
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at <= list.size()) {
    const auto comma = std::min(list.find(',', at), list.size());
    std::string name = list.substr(at, comma - at);
    if (!kKnown.count(name))
      throw UsageError("--middleware: unknown '" + name +
                       "' (pass, timeout, throttle, circuit_breaker, deduplicate)");
    names.push_back(std::move(name));
    at = comma + 1;
  }
  return names;
}

// What every run of this command shares, from its flags (the URL is each run's own).
BenchSettings settings_from(const Args& args) {
  BenchSettings s;
  s.topic = args.value("topic").value_or("bench");
  s.messages = args.number("messages", 100000, 1, 100'000'000);
  s.size = args.number("size", 200, 1, 64 << 20);
  s.publishers = args.number("publishers", 1, 0, 64);
  s.subscribers = args.number("subscribers", 1, 0, 64);
  s.window = args.number("window", 1000, 1, 1'000'000);
  s.batch = args.number("batch", 1, 1, 100'000);
  s.concurrency = args.number("concurrency", 0, 0, 256);
  s.batch_consume = args.number("batch-consume", 0, 1, 100'000);
  if (args.has("batch-wait") && !args.has("batch-consume"))
    throw UsageError("--batch-wait goes with --batch-consume");
  s.batch_wait = std::chrono::milliseconds(args.number("batch-wait", 100, 1, 3'600'000));
  if (auto list = args.value("middleware")) s.middleware = middleware_names(*list);
  s.requests = args.has("requests");
  s.latency = !args.has("no-latency");
  s.rate = static_cast<double>(args.number("rate", 0, 1, 100'000'000));
  s.timeout = std::chrono::seconds(args.number("timeout", 600, 1, 86400));
  s.group = args.value("group");
  if (args.has("from")) s.from = args.number("from", 0, 0, UINT64_MAX);
  if (s.publishers == 0 && s.subscribers == 0)
    throw UsageError("--publishers 0 and --subscribers 0: nothing to measure");
  if (s.rate > 0 && s.publishers == 0)
    throw UsageError("--rate paces publishers: none with --publishers 0");
  if (!args.has("topic") && s.publishers > 0 && s.subscribers > 0) {
    // A topic of this invocation's own: a group an earlier run left on a shared topic would
    // keep a copy of every message published there, until the broker is full.
    char nonce[16];
    std::snprintf(nonce, sizeof nonce, "%08x", static_cast<unsigned>(std::random_device{}()));
    s.topic = std::string("bench-") + nonce;
  }
  return s;
}

// --report FILE.svg|FILE.html, checked.
std::optional<std::string> report_from(const Args& args) {
  auto report = args.value("report");
  const auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return report->size() > n && report->compare(report->size() - n, n, suffix) == 0;
  };
  if (report && !ends_with(".svg") && !ends_with(".html"))
    throw UsageError("--report wants a FILE.svg or FILE.html, got '" + *report + "'");
  return report;
}

// The workload's line above a comparison's table and report.
std::string workload_line(const BenchSettings& s, BenchMode mode, std::uint64_t rounds) {
  char workload[256];
  std::snprintf(
      workload, sizeof workload, "%s, %llu x %llu B, %llu publisher(s), %llu %s%s%s",
      mode_name(mode), static_cast<unsigned long long>(s.messages),
      static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.publishers),
      static_cast<unsigned long long>(s.subscribers),
      mode == BenchMode::request ? "responder(s)" : "subscriber(s)",
      s.rate > 0
          ? (", " + std::to_string(static_cast<long long>(s.rate)) + " msgs/s offered").c_str()
          : "",
      (", " + std::to_string(rounds) + " rounds").c_str());
  return workload;
}

// --compare: every URL `rounds` times, in alternating order, then the table, the JSON lines and
// the report.
int run_compare(const BenchSettings& s, const std::vector<Target>& targets, BenchClients& clients,
                std::uint64_t rounds, const std::optional<std::string>& report, bool terminal) {
  std::vector<ComparedUrl> compared;
  for (const auto& t : targets) compared.push_back(ComparedUrl{t.label, t.url, t.in_process, {}});
  bool failed = false;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < targets.size(); ++k) {
      // Alternating order: every URL runs first, and last, as often as the others.
      const std::size_t i = round % 2 ? targets.size() - 1 - k : k;
      BenchSettings run = s;
      run.url = targets[i].url;
      if (s.publishers > 0)
        run.topic = s.topic + "-" + std::to_string(round + 1) + "-" + std::to_string(i + 1);
      BenchResult r = run_bench_once(run, clients);
      failed = failed || r.failures || r.timed_out;
      if (terminal)
        std::fprintf(stderr, "round %llu/%llu %s: %.0f msgs/s, p50 %llu us, p99 %llu us%s\n",
                     static_cast<unsigned long long>(round + 1),
                     static_cast<unsigned long long>(rounds), targets[i].label.c_str(),
                     r.msgs_per_sec, static_cast<unsigned long long>(r.latency_at(50)),
                     static_cast<unsigned long long>(r.latency_at(99)),
                     r.failures || r.timed_out ? ", with failures" : "");
      compared[i].rounds.push_back(std::move(r));
    }
  }
  const std::string workload = workload_line(s, compared[0].rounds.front().mode, rounds);
  std::printf("%s\n%s", workload.c_str(), comparison_table(compared).c_str());
  for (const auto& url : compared)
    for (std::size_t r = 0; r < url.rounds.size(); ++r)
      std::printf("%s\n", json_line(s, url.rounds[r],
                                    "\"url\":" + text::json_quote(url.label) +
                                        ",\"round\":" + std::to_string(r + 1) + ",")
                              .c_str());
  for (const auto& url : compared) std::printf("%s\n", comparison_json(url).c_str());
  if (report) {
    const bool html = report->substr(report->size() - 5) == ".html";
    std::ofstream out(*report);
    out << (html ? comparison_html(compared, workload) : comparison_svg(compared, workload));
    if (!out) throw std::runtime_error("cannot write " + *report);
    std::fprintf(stderr, "report: %s\n", report->c_str());
  }
  return failed ? 1 : 0;
}

}  // namespace

int run_bench(const Argv& argv) {
  if (!argv.empty() && argv[0] == "merge")
    return run_bench_merge(Argv(argv.begin() + 1, argv.end()));
  if (!argv.empty() && argv[0] == "scale")
    return run_bench_scale(Argv(argv.begin() + 1, argv.end()));
  if (!argv.empty() && argv[0] == "worker")
    return run_bench_worker(Argv(argv.begin() + 1, argv.end()));
  for (const auto& arg : argv)
    if (arg == "--workload" || arg.rfind("--workload=", 0) == 0) return run_bench_workload(argv);
  Args args(argv,
            {"topic", "messages", "size", "publishers", "subscribers", "window", "batch",
             "concurrency", "timeout", "group", "from", "metrics", "rate", "rounds", "report",
             "batch-consume", "batch-wait", "middleware"},
            {"compare", "requests", "no-latency"});
  if (args.help()) return std::cout << kBenchUsage, 0;
  const bool compare = args.has("compare");
  if (!compare && args.positional().size() > 1)
    throw UsageError("unexpected argument '" + args.positional()[1] + "'");
  if (compare && args.positional().size() < 2) throw UsageError("--compare needs two URLs or more");
  if (!compare && (args.has("rounds") || args.has("report")))
    throw UsageError("--rounds and --report go with --compare");
  const std::vector<std::string> given =
      compare ? args.positional() : std::vector<std::string>{args.positional(0, "URL")};
  BenchSettings s = settings_from(args);
  const std::uint64_t rounds = args.number("rounds", 3, 1, 1000);
  const auto report = report_from(args);
  const bool terminal = isatty(STDOUT_FILENO) != 0;

  BenchClients clients;
  // Declared after the clients: destroyed first, so no scrape reads a list that is gone.
  auto endpoint = metrics_endpoint_if_asked(args, [&](std::string& body) {
    std::lock_guard<std::mutex> lock(clients.mutex);
    std::vector<metrics::ClientMetrics> all;
    for (const auto& client : clients.all) all.push_back(client.metrics());
    metrics::write_prometheus(body, all);
  });
  std::vector<std::unique_ptr<testing::TestBroker>> brokers;
  std::vector<Target> targets;
  for (const auto& g : given) targets.push_back(resolve_target(g, brokers));
  if (compare) return run_compare(s, targets, clients, rounds, report, terminal);

  s.url = targets[0].url;
  s.progress = terminal;
  const BenchResult r = run_bench_once(s, clients);
  print_run(s, r, targets[0]);
  std::printf("%s\n", json_line(s, r, "").c_str());
  return r.failures || r.timed_out ? 1 : 0;
}

}  // namespace polybus::cli
