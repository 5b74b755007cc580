// SPDX-License-Identifier: Apache-2.0
#include "workload.hpp"

#include <yaml-cpp/yaml.h>

#include <sys/stat.h>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <vector>

namespace polybus::bench {
namespace {

using Setter = std::function<void(Workload&, const YAML::Node&, const std::string& where)>;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw WorkloadError(where + ": " + what);
}

std::string scalar_text(const YAML::Node& node) {
  return node.IsScalar() ? "'" + node.Scalar() + "'" : "a YAML collection";
}

// An integer in [min, max]; YAML's decimals only ("1e3" and "0x10" are not integers to OMB).
std::uint64_t integer(const YAML::Node& node, const std::string& where, std::uint64_t min,
                      std::uint64_t max) {
  if (!node.IsScalar()) refuse(where, "wants an integer, got " + scalar_text(node));
  const std::string& text = node.Scalar();
  std::uint64_t value = 0;
  bool digits = !text.empty();
  for (char c : text) {
    if (c < '0' || c > '9') {
      digits = false;
      break;
    }
    if (value > (UINT64_MAX - 9) / 10) refuse(where, "'" + text + "' is out of range");
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (!digits)
    refuse(where,
           (text.rfind('-', 0) == 0 ? "must not be negative, got '" : "wants an integer, got '") +
               text + "'");
  if (value < min || value > max)
    refuse(where, std::to_string(value) + " is out of range (" + std::to_string(min) + " to " +
                      std::to_string(max) + ")");
  return value;
}

double real(const YAML::Node& node, const std::string& where, double min, double max) {
  double value = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value))
    refuse(where, "wants a number, got " + scalar_text(node));
  if (value < min || value > max)
    refuse(where, node.Scalar() + " is out of range (" + std::to_string(min) + " to " +
                      std::to_string(max) + ")");
  return value;
}

bool boolean(const YAML::Node& node, const std::string& where) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
    refuse(where, "wants true or false, got " + scalar_text(node));
  return value;
}

std::string text(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) refuse(where, "wants a string, got a YAML collection");
  return node.Scalar();
}

std::map<std::string, Setter> setters(const WorkloadLimits& limits) {
  const std::uint64_t max_count = limits.max_clients;
  return {
      {"name",
       [](Workload& w, const YAML::Node& n, const std::string& at) { w.name = text(n, at); }},
      {"topics",
       [&](Workload& w, const YAML::Node& n, const std::string& at) {
         w.topics = static_cast<std::uint32_t>(integer(n, at, 1, limits.max_topics));
       }},
      {"partitionsPerTopic",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.partitions_per_topic = static_cast<std::uint32_t>(integer(n, at, 1, 10'000));
       }},
      {"keyDistributor",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         const std::string name = text(n, at);
         if (name == "NO_KEY")
           w.key_distributor = KeyDistributor::no_key;
         else if (name == "KEY_ROUND_ROBIN")
           w.key_distributor = KeyDistributor::key_round_robin;
         else if (name == "RANDOM_NANO")
           w.key_distributor = KeyDistributor::random_nano;
         else
           refuse(at, "'" + name + "' is none of NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO");
       }},
      {"messageSize",
       [&](Workload& w, const YAML::Node& n, const std::string& at) {
         w.message_size = integer(n, at, 1, limits.max_payload);
       }},
      {"useRandomizedPayloads",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.use_randomized_payloads = boolean(n, at);
       }},
      {"randomBytesRatio", [](Workload& w, const YAML::Node& n,
                              const std::string& at) { w.random_bytes_ratio = real(n, at, 0, 1); }},
      {"randomizedPayloadPoolSize",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.randomized_payload_pool_size = static_cast<std::uint32_t>(integer(n, at, 0, 100'000));
       }},
      {"payloadFile", [](Workload& w, const YAML::Node& n,
                         const std::string& at) { w.payload_file = text(n, at); }},
      {"subscriptionsPerTopic",
       [=](Workload& w, const YAML::Node& n, const std::string& at) {
         w.subscriptions_per_topic = static_cast<std::uint32_t>(integer(n, at, 0, max_count));
       }},
      {"producersPerTopic",
       [=](Workload& w, const YAML::Node& n, const std::string& at) {
         w.producers_per_topic = static_cast<std::uint32_t>(integer(n, at, 0, max_count));
       }},
      {"consumerPerSubscription",
       [=](Workload& w, const YAML::Node& n, const std::string& at) {
         w.consumer_per_subscription = static_cast<std::uint32_t>(integer(n, at, 0, max_count));
       }},
      {"producerRate",
       [&](Workload& w, const YAML::Node& n, const std::string& at) {
         w.producer_rate = integer(n, at, 0, limits.max_rate);
       }},
      {"consumerBacklogSizeGB",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.consumer_backlog_size_gb = integer(n, at, 0, 1024);
       }},
      {"backlogDrainRatio",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.backlog_drain_ratio = real(n, at, 0.01, 100);
       }},
      {"testDurationMinutes",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.test_duration_minutes = static_cast<std::uint32_t>(integer(n, at, 0, 7 * 24 * 60));
       }},
      {"warmupDurationMinutes",
       [](Workload& w, const YAML::Node& n, const std::string& at) {
         w.warmup_duration_minutes = static_cast<std::uint32_t>(integer(n, at, 0, 24 * 60));
       }},
  };
}

}  // namespace

const char* key_distributor_name(KeyDistributor key) {
  switch (key) {
    case KeyDistributor::no_key:
      return "NO_KEY";
    case KeyDistributor::key_round_robin:
      return "KEY_ROUND_ROBIN";
    case KeyDistributor::random_nano:
      return "RANDOM_NANO";
  }
  return "?";
}

std::chrono::milliseconds Workload::test_duration() const {
  return test_duration_override.count() > 0 ? test_duration_override
                                            : std::chrono::minutes(test_duration_minutes);
}

std::chrono::milliseconds Workload::warmup_duration() const {
  return warmup_duration_override.count() >= 0 ? warmup_duration_override
                                               : std::chrono::minutes(warmup_duration_minutes);
}

std::uint64_t Workload::consumer_backlog_bytes() const {
  return consumer_backlog_bytes_override > 0 ? consumer_backlog_bytes_override
                                             : consumer_backlog_size_gb << 30;
}

Workload parse_workload(const std::string& yaml, const std::string& name,
                        const WorkloadLimits& limits) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    refuse(name, "not YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ", column " +
                     std::to_string(e.mark.column + 1) + ")");
  }
  if (!root.IsMap()) refuse(name, "not a YAML mapping of OMB workload fields");
  Workload w;
  const auto known = setters(limits);
  for (const auto& entry : root) {
    const std::string field = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    const std::string where =
        name + ": " + field + " (line " + std::to_string(entry.first.Mark().line + 1) + ")";
    auto found = known.find(field);
    if (found == known.end()) {
      std::string list;
      for (const auto& [k, setter] : known) list += (list.empty() ? "" : ", ") + k;
      refuse(where, "not a field of an OMB workload (" + list + ")");
    }
    found->second(w, entry.second, where);
  }
  auto require = [&](const char* field) {
    if (!root[field]) refuse(name, std::string("no ") + field + " (OMB's workloads all give it)");
  };
  require("topics");
  require("subscriptionsPerTopic");
  require("producersPerTopic");
  require("consumerPerSubscription");
  require("producerRate");
  require("testDurationMinutes");
  if (!root["messageSize"] && w.payload_file.empty())
    refuse(name, "neither messageSize nor payloadFile: no message to send");
  if (w.partitions_per_topic == 0) w.partitions_per_topic = 1;
  if (w.name.empty()) w.name = name;
  const std::uint64_t clients =
      static_cast<std::uint64_t>(w.topics) *
      (w.producers_per_topic +
       static_cast<std::uint64_t>(w.subscriptions_per_topic) * w.consumer_per_subscription);
  if (clients > limits.max_clients)
    refuse(name +
               ": topics x (producersPerTopic + subscriptionsPerTopic x "
               "consumerPerSubscription)",
           std::to_string(clients) + " producers and consumers, more than " +
               std::to_string(limits.max_clients));
  if (w.producers_per_topic == 0 && w.consumer_per_subscription * w.subscriptions_per_topic == 0)
    refuse(name, "no producer and no consumer: nothing to measure");
  // As OMB's WorkloadGenerator: the rate search would take the paused consumers for a broker
  // that cannot keep up.
  if (w.consumer_backlog_size_gb > 0 && w.producer_rate == 0)
    refuse(name + ": consumerBacklogSizeGB",
           std::to_string(w.consumer_backlog_size_gb) +
               " with producerRate 0: the highest sustainable rate cannot be searched for while "
               "a backlog builds");
  if (w.use_randomized_payloads && w.randomized_payload_pool_size == 0)
    refuse(name + ": randomizedPayloadPoolSize",
           "0 with useRandomizedPayloads: no payload to send");
  if (!w.payload_file.empty()) {
    const std::string where = name + ": payloadFile";
    struct stat info {};
    if (stat(w.payload_file.c_str(), &info) != 0)
      refuse(where, "'" + w.payload_file +
                        "' does not exist (read relative to the working "
                        "directory, as OMB reads it from its repository's root)");
    if (!S_ISREG(info.st_mode)) refuse(where, "'" + w.payload_file + "' is not a file");
    if (static_cast<std::uint64_t>(info.st_size) > limits.max_payload)
      refuse(where, "'" + w.payload_file + "' is " + std::to_string(info.st_size) +
                        " bytes, larger than --max-payload " + std::to_string(limits.max_payload));
    if (info.st_size == 0) refuse(where, "'" + w.payload_file + "' is empty");
  }
  return w;
}

Workload read_workload(const std::string& path, const WorkloadLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(path, "cannot be read");
  // A workload is a few hundred bytes: a larger file is not one.
  std::string yaml(1 << 20, '\0');
  in.read(yaml.data(), static_cast<std::streamsize>(yaml.size()));
  yaml.resize(static_cast<std::size_t>(in.gcount()));
  if (in.peek() != EOF) refuse(path, "larger than 1 MB: not an OMB workload");
  return parse_workload(yaml, path, limits);
}

std::vector<std::string> workload_payloads(const Workload& w) {
  if (!w.payload_file.empty()) {
    std::ifstream in(w.payload_file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) throw std::runtime_error(w.payload_file + ": cannot be read");
    return {bytes};
  }
  std::string filler(w.message_size, ' ');
  for (std::size_t i = 0; i < filler.size(); ++i) filler[i] = static_cast<char>('a' + i % 26);
  if (!w.use_randomized_payloads) return {filler};
  // OMB's randomized payloads: randomBytesRatio of each one random, the rest zeros.
  std::mt19937_64 random(42);
  std::vector<std::string> pool;
  const auto random_bytes = static_cast<std::size_t>(w.random_bytes_ratio * w.message_size);
  for (std::uint32_t i = 0; i < w.randomized_payload_pool_size; ++i) {
    std::string payload(w.message_size, '\0');
    for (std::size_t b = 0; b < random_bytes; ++b) payload[b] = static_cast<char>(random() & 0xff);
    pool.push_back(std::move(payload));
  }
  return pool;
}

}  // namespace polybus::bench
