#include "lookup_registry.hpp"

#include <algorithm>

#include "go_text.hpp"

namespace polybus::nsq::testing::detail {
namespace {

bool is_ephemeral(std::string_view name) {
  constexpr std::string_view kSuffix = "#ephemeral";
  return name.size() >= kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix;
}

std::string producer_json(const ProducerInfo& producer) {
  return "{\"remote_address\":" + go_json_string(producer.remote_address) +
         ",\"hostname\":" + go_json_string(producer.hostname) +
         ",\"broadcast_address\":" + go_json_string(producer.broadcast_address) +
         ",\"tcp_port\":" + std::to_string(producer.tcp_port) +
         ",\"http_port\":" + std::to_string(producer.http_port) +
         ",\"version\":" + go_json_string(producer.version) + "}";
}

}  // namespace

void LookupRegistry::add(Registration& registration, const ProducerInfo& producer) {
  const std::string id = producer.id();
  auto& producers = registration.producers;
  const bool known = std::any_of(producers.begin(), producers.end(),
                                 [&](const ProducerInfo& p) { return p.id() == id; });
  if (!known) producers.push_back(producer);
}

bool LookupRegistry::remove(Registration& registration, const std::string& producer_id) {
  auto& producers = registration.producers;
  const auto end = std::remove_if(producers.begin(), producers.end(),
                                  [&](const ProducerInfo& p) { return p.id() == producer_id; });
  const bool removed = end != producers.end();
  producers.erase(end, producers.end());
  return removed;
}

void LookupRegistry::add_topic_producer(const std::string& topic, const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  add(topics_[topic], producer);
}

void LookupRegistry::remove_topic_producer(const std::string& topic,
                                           const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  remove(it->second, producer_id);
  // nsqlookupd forgets an ephemeral topic with its last producer, and keeps any other.
  if (it->second.producers.empty() && is_ephemeral(topic)) {
    topics_.erase(it);
    channels_.erase(topic);
  }
}

void LookupRegistry::add_channel_producer(const std::string& topic, const std::string& channel,
                                          const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  add(channels_[topic][channel], producer);
}

void LookupRegistry::remove_channel_producer(const std::string& topic, const std::string& channel,
                                             const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto topic_it = channels_.find(topic);
  if (topic_it == channels_.end()) return;
  auto it = topic_it->second.find(channel);
  if (it == topic_it->second.end()) return;
  remove(it->second, producer_id);
  if (it->second.producers.empty() && is_ephemeral(channel)) topic_it->second.erase(it);
}

void LookupRegistry::add_node(const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  nodes_[producer.id()] = producer;
}

LookupResult LookupRegistry::nodes() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string data = "{\"producers\":[";
  bool first = true;
  for (const auto& [id, producer] : nodes_) {
    if (!first) data += ',';
    data += producer_json(producer);
    first = false;
  }
  data += "]}";
  LookupResult result;
  result.json = wrapped_ ? R"({"status_code":200,"status_txt":"OK","data":)" + data + "}" : data;
  return result;
}

void LookupRegistry::remove_node_if_unlisted(const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto lists = [&](const Registration& r) {
    return std::any_of(r.producers.begin(), r.producers.end(),
                       [&](const ProducerInfo& p) { return p.id() == producer_id; });
  };
  for (const auto& [topic, registration] : topics_)
    if (lists(registration)) return;
  nodes_.erase(producer_id);
}

void LookupRegistry::remove_producer(const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  nodes_.erase(producer_id);
  for (auto& [topic, registration] : topics_) remove(registration, producer_id);
  for (auto& [topic, channels] : channels_) {
    for (auto& [channel, registration] : channels) remove(registration, producer_id);
  }
}

void LookupRegistry::remove_topic(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  topics_.erase(topic);
  channels_.erase(topic);
}

void LookupRegistry::set_wrapped(bool wrapped) {
  std::lock_guard<std::mutex> lock(mutex_);
  wrapped_ = wrapped;
}

std::uint64_t LookupRegistry::lookup_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lookup_count_;
}

LookupResult LookupRegistry::lookup(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++lookup_count_;
  LookupResult result;
  auto it = topics_.find(topic);
  if (it == topics_.end()) {
    result.status = 404;
    result.json = wrapped_ ? R"({"status_code":404,"status_txt":"TOPIC_NOT_FOUND","data":null})"
                           : R"({"message":"TOPIC_NOT_FOUND"})";
    return result;
  }
  std::string data = "{\"channels\":[";
  bool first = true;
  if (auto channels = channels_.find(topic); channels != channels_.end()) {
    for (const auto& [channel, registration] : channels->second) {
      if (!first) data += ',';
      data += go_json_string(channel);
      first = false;
    }
  }
  data += "],\"producers\":[";
  first = true;
  for (const ProducerInfo& producer : it->second.producers) {
    if (!first) data += ',';
    data += producer_json(producer);
    first = false;
  }
  data += "]}";
  result.json = wrapped_ ? R"({"status_code":200,"status_txt":"OK","data":)" + data + "}" : data;
  return result;
}

}  // namespace polybus::nsq::testing::detail
