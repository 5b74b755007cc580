// SPDX-License-Identifier: Apache-2.0
#include "scale_run.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "polybus/client.hpp"
#include "polybus/metrics.hpp"

namespace polybus::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Sockets this process has open: what subscribing opened, whatever the scheme calls an endpoint
// (NSQ opens a connection per topic to the same nsqd).
std::uint64_t open_sockets() {
  std::uint64_t count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  char target[64];
  while (const dirent* entry = readdir(dir)) {
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const auto n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    if (std::string(target, static_cast<std::size_t>(n)).rfind("socket:", 0) == 0) ++count;
  }
  closedir(dir);
  return count;
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string number(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double resident_kib() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1024;
}

namespace {

// Both clients answer before the baseline is taken. Best effort: a scheme that connects only
// once something is subscribed (NSQ) has nothing to ping yet; a broker that is down fails the
// subscriptions, with its cause.
void ping_both(Client& subscriber, Client& publisher) {
  for (Client* c : {&subscriber, &publisher}) {
    std::promise<void> pinged;
    c->ping(std::chrono::seconds(30), [&](const Status&) { pinged.set_value(); });
    pinged.get_future().wait();
  }
}

std::vector<std::string> topic_names(const ScaleSettings& s) {
  if (!s.fan_out_topic.empty()) return {s.fan_out_topic};
  char nonce[16];
  std::snprintf(nonce, sizeof nonce, "%06x",
                static_cast<unsigned>(std::random_device{}() & 0xffffff));
  std::vector<std::string> topics;
  for (std::uint32_t i = 0; i < s.topics; ++i)
    topics.push_back("scale-" + std::string(nonce) + "-" + std::to_string(i));
  return topics;
}

// Fan-out: ready means one nsqd answered; the others are connected as the lookupd names them.
void wait_for_connections(const Client& subscriber, const ScaleSettings& s,
                          SteadyClock::time_point subscribe_start) {
  const auto deadline = SteadyClock::now() + s.timeout;
  while (subscriber.metrics().connected_endpoints < s.expect_connections) {
    if (SteadyClock::now() > deadline)
      throw std::runtime_error(std::to_string(subscriber.metrics().connected_endpoints) + " of " +
                               std::to_string(s.expect_connections) + " connections after " +
                               number("%.0f", seconds_since(subscribe_start)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a count, as a user would
  }
}

// s.messages spread over the topics, at most 1000 in flight, and the rate they arrived at.
void measure_throughput(Client& publisher, const std::vector<std::string>& topics, bool pubsub,
                        const std::atomic<std::uint64_t>& received, const ScaleSettings& s,
                        ScalePoint& point) {
  const std::uint64_t before = received.load();
  std::atomic<std::uint64_t> failed{0};
  const auto start = SteadyClock::now();
  // The publishing thread waits for completions, woken by them.
  std::mutex mutex;
  std::condition_variable room;
  std::uint64_t in_flight = 0;
  auto completed = [&](bool ok) {
    if (!ok) ++failed;
    std::lock_guard<std::mutex> lock(mutex);
    --in_flight;
    room.notify_one();
  };
  const std::string payload(100, 'x');
  for (std::uint64_t i = 0; i < s.messages; ++i) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      room.wait(lock, [&] { return in_flight < 1000; });
      ++in_flight;
    }
    const std::string& topic = topics[i % topics.size()];
    if (pubsub)
      publisher.publish(topic, payload, [&](const Status& status) { completed(!status); });
    else
      publisher.request(topic, payload, std::chrono::seconds(60),
                        [&](Reply reply) { completed(!reply.ec); });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    room.wait_for(lock, s.timeout, [&] { return in_flight == 0; });
  }
  const auto deadline = SteadyClock::now() + s.timeout;
  while (received.load() - before + failed.load() < s.messages && SteadyClock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  point.delivered = received.load() - before;
  point.msgs_per_sec = static_cast<double>(point.delivered) / seconds_since(start);
}

}  // namespace

ScalePoint measure_scale(const ScaleSettings& s) {
  const bool fan_out = !s.fan_out_topic.empty();
  ScalePoint point;
  point.topics = fan_out ? 1 : s.topics;
  // The publisher first, and both clients connected, before the baseline: what grows after it
  // is the subscriptions'.
  Client subscriber = polybus::connect(s.url);
  Client publisher = polybus::connect(s.url);
  point.scheme = subscriber.scheme();
  const Capabilities caps = subscriber.capabilities();
  const bool pubsub = caps.publish && caps.subscribe;
  ping_both(subscriber, publisher);
  const std::vector<std::string> topics = topic_names(s);

  std::atomic<std::uint64_t> received{0};
  const std::uint64_t sockets_before = open_sockets();
  point.base_kib = resident_kib();
  const auto subscribe_start = SteadyClock::now();
  std::vector<Subscription> subscriptions;
  subscriptions.reserve(topics.size());
  for (const auto& topic : topics) {
    SubscribeOptions options;
    if (caps.consumer_groups) options.group = "scale";
    if (pubsub)
      subscriptions.push_back(subscriber.subscribe(topic, options, [&](Message&) { ++received; }));
    else
      subscriptions.push_back(subscriber.serve(topic, options, [&](Message&) {
        ++received;
        return std::string();
      }));
  }
  for (auto& sub : subscriptions)
    if (auto status = sub.wait_ready(s.timeout))
      throw std::runtime_error("a subscription failed: " + status.message());
  if (fan_out) wait_for_connections(subscriber, s, subscribe_start);
  point.subscribe_seconds = seconds_since(subscribe_start);
  point.ready_kib = resident_kib();
  const std::uint64_t sockets = open_sockets();
  point.connections = sockets > sockets_before ? sockets - sockets_before : 0;
  const double grown = point.ready_kib - point.base_kib;
  point.kib_per_subscription = grown / static_cast<double>(subscriptions.size());
  point.kib_per_connection = point.connections ? grown / static_cast<double>(point.connections) : 0;

  // Idle: nothing published, only what keeps the connections alive.
  const double cpu_start = cpu_seconds();
  const auto idle_start = SteadyClock::now();
  std::this_thread::sleep_for(s.idle);
  point.idle_seconds = seconds_since(idle_start);
  point.idle_cpu_percent = 100 * (cpu_seconds() - cpu_start) / point.idle_seconds;

  if (s.messages > 0 && !fan_out) measure_throughput(publisher, topics, pubsub, received, s, point);
  for (auto& sub : subscriptions) sub.unsubscribe();
  subscriber.close_sync(std::chrono::seconds(30));
  publisher.close_sync(std::chrono::seconds(30));
  return point;
}

std::string to_json(const ScalePoint& p) {
  return "{\"scheme\":\"" + p.scheme + "\",\"topics\":" + std::to_string(p.topics) +
         ",\"connections\":" + std::to_string(p.connections) +
         ",\"base_kib\":" + number("%.0f", p.base_kib) +
         ",\"ready_kib\":" + number("%.0f", p.ready_kib) +
         ",\"kib_per_subscription\":" + number("%.2f", p.kib_per_subscription) +
         ",\"kib_per_connection\":" + number("%.2f", p.kib_per_connection) +
         ",\"subscribe_seconds\":" + number("%.4f", p.subscribe_seconds) +
         ",\"idle_cpu_percent\":" + number("%.3f", p.idle_cpu_percent) +
         ",\"idle_seconds\":" + number("%.2f", p.idle_seconds) +
         ",\"delivered\":" + std::to_string(p.delivered) +
         ",\"msgs_per_sec\":" + number("%.0f", p.msgs_per_sec) + "}";
}

}  // namespace polybus::bench
