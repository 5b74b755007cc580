// SPDX-License-Identifier: Apache-2.0
#include "omb_worker.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/io_pool.hpp"
#include "bench/paced_sender.hpp"
#include "bench/payload_stamp.hpp"
#include "polybus/client.hpp"
#include "polybus/text/text.hpp"
#include "worker_json.hpp"

namespace polybus::bench::worker {
namespace {

using std::chrono::milliseconds;

// What the driver file says besides OMB's name and driverClass.
struct DriverConfig {
  std::string name, url, topic_prefix = "polybus-benchmark";
  std::uint32_t max_in_flight = 1000;  // publishes in flight per producer
  std::size_t io_threads = 2, send_threads = 2;
  milliseconds subscribe_timeout{30'000}, close_timeout{10'000};
  std::chrono::microseconds send_tick{1000};
  std::uint32_t max_batch = 100;  // messages due together, in one publish_batch
};

constexpr const char* kDriverClass = "polybus";
constexpr std::size_t kMaxDriverFile = 64 * 1024;

std::uint64_t yaml_integer(const YAML::Node& node, const char* key, std::uint64_t min,
                           std::uint64_t max) {
  std::uint64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<std::uint64_t>::decode(node, value) || value < min ||
      value > max)
    throw std::runtime_error(std::string("driver file: ") + key + " wants an integer from " +
                             std::to_string(min) + " to " + std::to_string(max));
  return value;
}

DriverConfig read_driver(std::string_view yaml) {
  if (yaml.size() > kMaxDriverFile)
    throw std::runtime_error("driver file: " + std::to_string(yaml.size()) + " bytes, more than " +
                             std::to_string(kMaxDriverFile));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string("driver file: not YAML: ") + e.what());
  }
  if (!root.IsMap()) throw std::runtime_error("driver file: not a YAML mapping");
  DriverConfig config;
  const auto text = [&](const char* key) -> std::string {
    const YAML::Node node = root[key];
    if (!node) return {};
    if (!node.IsScalar())
      throw std::runtime_error(std::string("driver file: ") + key + " is not text");
    return node.Scalar();
  };
  config.name = text("name");
  const std::string driver_class = text("driverClass");
  if (driver_class != kDriverClass)
    throw std::runtime_error("driver file: driverClass '" + driver_class + "' is not '" +
                             kDriverClass + "'");
  config.url = text("url");
  if (config.url.empty()) throw std::runtime_error("driver file: no url (the polybus URL)");
  if (auto prefix = text("topicPrefix"); !prefix.empty()) config.topic_prefix = prefix;
  if (root["maxInFlightPerProducer"])
    config.max_in_flight = static_cast<std::uint32_t>(
        yaml_integer(root["maxInFlightPerProducer"], "maxInFlightPerProducer", 1, 1'000'000));
  if (root["ioThreads"]) config.io_threads = yaml_integer(root["ioThreads"], "ioThreads", 1, 64);
  if (root["sendThreads"])
    config.send_threads = yaml_integer(root["sendThreads"], "sendThreads", 1, 64);
  if (root["sendTickMicros"])
    config.send_tick = std::chrono::microseconds(
        yaml_integer(root["sendTickMicros"], "sendTickMicros", 0, 1'000'000));
  if (root["maxBatch"])
    config.max_batch =
        static_cast<std::uint32_t>(yaml_integer(root["maxBatch"], "maxBatch", 1, 10'000));
  if (root["subscribeTimeoutSeconds"])
    config.subscribe_timeout = std::chrono::seconds(
        yaml_integer(root["subscribeTimeoutSeconds"], "subscribeTimeoutSeconds", 1, 3600));
  if (root["closeTimeoutSeconds"])
    config.close_timeout = std::chrono::seconds(
        yaml_integer(root["closeTimeoutSeconds"], "closeTimeoutSeconds", 1, 3600));
  return config;
}

// OMB's topic names: <prefix>-<index, 7 digits>-<7 random characters>. Letters and digits only
// in the random part, so that the name is a valid topic in every scheme.
std::string topic_name(const std::string& prefix, std::uint32_t index, std::mt19937_64& random) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  char digits[16];
  std::snprintf(digits, sizeof digits, "%07u", index);
  std::string name = prefix + "-" + digits + "-";
  for (int i = 0; i < 7; ++i) name += kAlphabet[random() % (sizeof kAlphabet - 1)];
  return name;
}

const rapidjson::Value& member(const rapidjson::Value& object, const char* key, const char* what) {
  static const rapidjson::Value kNull;
  if (!object.IsObject()) throw std::runtime_error(std::string(what) + ": not a JSON object");
  const auto it = object.FindMember(key);
  return it == object.MemberEnd() ? kNull : it->value;
}

std::uint32_t count_of(const rapidjson::Value& value, const char* key, std::uint32_t max) {
  if (value.IsNull()) return 0;  // missing: Jackson's default
  if (!value.IsUint() || value.GetUint() > max)
    throw std::runtime_error(std::string(key) + " wants a count up to " + std::to_string(max));
  return value.GetUint();
}

// Closes every client at once, each within `timeout`, and waits for them all.
void close_all(std::vector<Client>& clients, milliseconds timeout) {
  struct Latch {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t left = 0;
  };
  auto latch = std::make_shared<Latch>();
  latch->left = clients.size();
  for (auto& client : clients)
    client.close(timeout, [latch](const Status&) {
      std::lock_guard<std::mutex> lock(latch->mutex);
      if (--latch->left == 0) latch->cv.notify_all();
    });
  std::unique_lock<std::mutex> lock(latch->mutex);
  // A close completes by its deadline; the margin is for the completions to run.
  latch->cv.wait_for(lock, timeout + std::chrono::seconds(5), [&] { return latch->left == 0; });
}

}  // namespace

struct OmbWorker::Driver {
  explicit Driver(DriverConfig c) : config(std::move(c)), io(config.io_threads) {}
  ~Driver() {
    if (sender) sender->stop(config.close_timeout);
    close_all(clients, config.close_timeout);
  }

  ClientRef connect_one(const std::string& url) {
    ConnectOptions options;
    options.io_context = io.next();
    clients.push_back(polybus::connect(url, std::move(options)));
    return ClientRef(clients.back());
  }
  ClientRef connect_producer() { return connect_one(config.url); }
  // A consumer's handler only counts: it runs on the client's io thread (handler_thread=io),
  // which saves a hand-over per message, unless the URL says where handlers run.
  ClientRef connect_consumer() {
    if (config.url.find("handler_thread=") != std::string::npos) return connect_one(config.url);
    return connect_one(config.url + (config.url.find('?') == std::string::npos ? "?" : "&") +
                       "handler_thread=io");
  }

  const DriverConfig config;
  IoPool io;  // first: outlives every client of its contexts
  std::vector<Client> clients;
  Capabilities caps;
  bool pubsub = true;
  std::mt19937_64 random{std::random_device{}()};
  std::vector<PacedProducer> producers;
  std::vector<Subscription> subscriptions;
  std::unique_ptr<PacedSender> sender;  // last: stopped first
};

OmbWorker::OmbWorker(WorkerLimits limits, std::function<void(const std::string&)> log,
                     std::chrono::nanoseconds skew)
    : limits_(limits), log_(std::move(log)), skew_ns_(skew.count()) {}

std::int64_t OmbWorker::clock_ns() const {
  return wall_clock_ns() + skew_ns_;
}

void OmbWorker::set_clock_offset(std::string_view body) {
  const auto doc = parse_json(body, limits_.max_json_depth, "/polybus/clock-offset");
  constexpr std::int64_t kDay = 86'400'000'000'000;
  if (!doc.IsInt64() || doc.GetInt64() > kDay || doc.GetInt64() < -kDay)
    throw std::runtime_error("/polybus/clock-offset: not nanoseconds within a day");
  offset_ns_.store(doc.GetInt64());
}

OmbWorker::~OmbWorker() {
  stop_all();
}

WorkerAnswer OmbWorker::handle(std::string_view method, std::string_view path,
                               std::string_view body) {
  try {
    if (method == "POST") {
      if (path == "/initialize-driver") return initialize_driver(body), WorkerAnswer{};
      if (path == "/create-topics") return {200, create_topics(body)};
      if (path == "/create-producers") return create_producers(body), WorkerAnswer{};
      if (path == "/probe-producers") return probe_producers(), WorkerAnswer{};
      if (path == "/create-consumers") return create_consumers(body), WorkerAnswer{};
      if (path == "/pause-consumers") return pause_consumers(true), WorkerAnswer{};
      if (path == "/resume-consumers") return pause_consumers(false), WorkerAnswer{};
      if (path == "/start-load") return start_load(body), WorkerAnswer{};
      if (path == "/adjust-publish-rate") return adjust_publish_rate(body), WorkerAnswer{};
      if (path == "/stop-all") return stop_all(), WorkerAnswer{};
      if (path == "/reset-stats") return stats_.reset_latencies(), WorkerAnswer{};
      if (path == "/polybus/clock-offset") return set_clock_offset(body), WorkerAnswer{};
    } else if (method == "GET") {
      if (path == "/period-stats") return {200, stats_.take_period_stats()};
      if (path == "/cumulative-latencies") return {200, stats_.take_cumulative_latencies()};
      if (path == "/counters-stats") return {200, stats_.counters_stats()};
      if (path == "/polybus/clock")
        return {200, jackson_object({{"wallNanos", std::to_string(clock_ns())}})};
    }
    return {404, "Not found"};
  } catch (const std::exception& e) {
    if (log_) log_(std::string(method) + " " + std::string(path) + ": " + e.what());
    return {500, "Internal server error"};
  } catch (...) {
    if (log_) log_(std::string(method) + " " + std::string(path) + ": a non-standard exception");
    return {500, "Internal server error"};
  }
}

OmbWorker::Driver& OmbWorker::driver(const char* what) {
  if (!driver_) throw std::runtime_error(std::string(what) + " before /initialize-driver");
  return *driver_;
}

void OmbWorker::initialize_driver(std::string_view yaml) {
  if (driver_) throw std::runtime_error("a driver is already running (/stop-all ends it)");
  DriverConfig config = read_driver(yaml);
  auto driver = std::make_unique<Driver>(std::move(config));
  ClientRef first = driver->connect_producer();
  driver->caps = first.capabilities();
  driver->pubsub = driver->caps.publish && driver->caps.subscribe;
  if (!driver->pubsub && !driver->caps.request_reply)
    throw std::runtime_error(first.scheme() + " can neither publish/subscribe nor request/reply");
  if (log_)
    log_("driver '" + driver->config.name + "': " + driver->config.url + " (" +
         (driver->pubsub ? "publish/subscribe" : "request/reply") + ")");
  driver_ = std::move(driver);
}

// Names the topics. A topic needs no creating in any scheme: a subscription makes it.
std::string OmbWorker::create_topics(std::string_view body) {
  Driver& d = driver("/create-topics");
  const auto doc = parse_json(body, limits_.max_json_depth, "/create-topics");
  const std::uint32_t count = count_of(member(doc, "numberOfTopics", "/create-topics"),
                                       "numberOfTopics", limits_.max_topics);
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < count; ++i)
    names.push_back(topic_name(d.config.topic_prefix, i, d.random));
  return jackson_string_array(names);
}

void OmbWorker::create_producers(std::string_view body) {
  Driver& d = driver("/create-producers");
  const auto doc = parse_json(body, limits_.max_json_depth, "/create-producers");
  if (!doc.IsArray()) throw std::runtime_error("/create-producers: not a JSON array of topics");
  if (d.clients.size() + doc.Size() > limits_.max_clients)
    throw std::runtime_error("/create-producers: more than " + std::to_string(limits_.max_clients) +
                             " clients");
  for (const auto& topic : doc.GetArray()) {
    if (!topic.IsString() || topic.GetStringLength() == 0)
      throw std::runtime_error("/create-producers: a topic is not a non-empty string");
    d.producers.push_back(PacedProducer{d.connect_producer(),
                                        std::string(topic.GetString(), topic.GetStringLength())});
  }
}

// One 10-byte message of zeros from each producer, counted only in the total sent: the
// consumers are ready once they received one per subscription.
void OmbWorker::probe_producers() {
  Driver& d = driver("/probe-producers");
  for (auto& producer : d.producers) {
    auto done = [stats = &stats_](bool ok) {
      if (ok)
        stats->probe_sent();
      else
        stats->send_failed();
    };
    if (d.pubsub)
      producer.client.publish(producer.topic, std::string(10, '\0'),
                              [done](const Status& status) { done(!status); });
    else
      producer.client.request(producer.topic, std::string(10, '\0'),
                              [done](Reply reply) { done(!reply.ec); });
  }
}

void OmbWorker::create_consumers(std::string_view body) {
  Driver& d = driver("/create-consumers");
  const auto doc = parse_json(body, limits_.max_json_depth, "/create-consumers");
  const auto& entries = member(doc, "topicsSubscriptions", "/create-consumers");
  if (entries.IsNull()) return;
  if (!entries.IsArray())
    throw std::runtime_error("/create-consumers: topicsSubscriptions is not an array");
  if (d.clients.size() + entries.Size() > limits_.max_clients)
    throw std::runtime_error("/create-consumers: more than " + std::to_string(limits_.max_clients) +
                             " clients");
  const std::size_t first = d.subscriptions.size();
  for (const auto& entry : entries.GetArray()) {
    const auto& topic = member(entry, "topic", "/create-consumers: an entry");
    const auto& subscription = member(entry, "subscription", "/create-consumers: an entry");
    if (!topic.IsString() || !subscription.IsString() || topic.GetStringLength() == 0)
      throw std::runtime_error("/create-consumers: an entry wants a topic and a subscription");
    ClientRef client = d.connect_consumer();
    SubscribeOptions options;
    if (d.caps.consumer_groups)
      options.group.assign(subscription.GetString(), subscription.GetStringLength());
    auto on_receipt = [this](std::string_view payload) {
      std::optional<std::int64_t> end_to_end;
      if (auto sent = payload_stamp(payload)) {
        const std::int64_t micros = (clock_ns() - offset_ns_.load() - *sent) / 1000;
        if (micros >= 0) end_to_end = micros;
      }
      stats_.received(payload.size(), end_to_end);
    };
    const std::string name(topic.GetString(), topic.GetStringLength());
    if (d.pubsub)
      d.subscriptions.push_back(
          client.subscribe(name, options, [on_receipt](Message& m) { on_receipt(m.payload()); }));
    else
      d.subscriptions.push_back(client.serve(name, options, [on_receipt](Message& m) {
        on_receipt(m.payload());
        return std::string("ok");
      }));
  }
  // Returns once every new consumer is subscribed, so that the probe finds them.
  for (std::size_t i = first; i < d.subscriptions.size(); ++i)
    if (auto status = d.subscriptions[i].wait_ready(d.config.subscribe_timeout))
      throw std::runtime_error("/create-consumers: a subscription failed: " + status.message());
}

void OmbWorker::pause_consumers(bool pause) {
  if (!driver_) return;  // as OMB's flag: nothing to pause
  for (auto& sub : driver_->subscriptions) pause ? sub.pause() : sub.resume();
}

void OmbWorker::start_load(std::string_view body) {
  Driver& d = driver("/start-load");
  const auto doc = parse_json(body, limits_.max_json_depth, "/start-load");
  const auto& data = member(doc, "payloadData", "/start-load");
  const auto& rate = member(doc, "publishRate", "/start-load");
  std::vector<std::string> payloads;
  if (data.IsArray()) {
    if (data.Size() > limits_.max_payloads)
      throw std::runtime_error("/start-load: more than " + std::to_string(limits_.max_payloads) +
                               " payloads");
    for (const auto& item : data.GetArray()) {
      std::string bytes;
      std::size_t bad_at = 0;
      if (!item.IsString() ||
          !text::base64_decode(std::string_view(item.GetString(), item.GetStringLength()), bytes,
                               bad_at))
        throw std::runtime_error("/start-load: a payloadData entry is not base64");
      payloads.push_back(std::move(bytes));
    }
  } else if (!data.IsNull()) {
    throw std::runtime_error("/start-load: payloadData is not an array");
  }
  if (!rate.IsNull() && (!rate.IsNumber() || !std::isfinite(rate.GetDouble())))
    throw std::runtime_error("/start-load: publishRate is not a number");
  if (payloads.empty()) payloads.emplace_back();  // Jackson's default: an empty list
  if (d.sender) d.sender->stop(d.config.close_timeout);
  PacedSenderSettings settings;
  settings.rate = std::max(1.0, rate.IsNull() ? 0.0 : rate.GetDouble());
  settings.threads = d.config.send_threads;
  settings.window = d.config.max_in_flight;
  settings.requests = !d.pubsub;
  settings.stamp_shift_ns = skew_ns_ - offset_ns_.load();
  settings.tick = d.config.send_tick;
  if (d.pubsub && d.caps.batch_publish) settings.max_batch = d.config.max_batch;
  PacedSenderHooks hooks;
  hooks.on_send = [stats = &stats_](std::int64_t delay_us) { stats->send_delayed(delay_us); };
  hooks.on_published = [stats = &stats_](std::size_t bytes, std::int64_t latency_us) {
    stats->sent(bytes, latency_us);
  };
  hooks.on_failed = [stats = &stats_](const std::string&) { stats->send_failed(); };
  d.sender =
      std::make_unique<PacedSender>(d.producers, std::move(payloads), settings, std::move(hooks));
}

void OmbWorker::adjust_publish_rate(std::string_view body) {
  Driver& d = driver("/adjust-publish-rate");
  const auto doc = parse_json(body, limits_.max_json_depth, "/adjust-publish-rate");
  if (!doc.IsNumber() || !std::isfinite(doc.GetDouble()))
    throw std::runtime_error("/adjust-publish-rate: not a number");
  if (d.sender) d.sender->set_rate(std::max(1.0, doc.GetDouble()));
}

void OmbWorker::stop_all() {
  driver_.reset();
  offset_ns_.store(0);  // the next coordinator may not measure clocks
  stats_.reset_for_stop();
}

}  // namespace polybus::bench::worker
