// SPDX-License-Identifier: Apache-2.0
#include "lookup_registry.hpp"

#include <algorithm>

#include "go_text.hpp"

namespace polybus::nsq::testing::detail {
namespace {

bool is_ephemeral(std::string_view name) {
  constexpr std::string_view kSuffix = "#ephemeral";
  return name.size() >= kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix;
}

std::string peer_fields(const ProducerInfo& producer) {
  return "\"remote_address\":" + go_json_string(producer.remote_address) +
         ",\"hostname\":" + go_json_string(producer.hostname) +
         ",\"broadcast_address\":" + go_json_string(producer.broadcast_address) +
         ",\"tcp_port\":" + std::to_string(producer.tcp_port) +
         ",\"http_port\":" + std::to_string(producer.http_port) +
         ",\"version\":" + go_json_string(producer.version);
}

}  // namespace

void LookupRegistry::set_timing(std::chrono::milliseconds inactive_producer_timeout,
                                std::chrono::milliseconds tombstone_lifetime) {
  std::lock_guard<std::mutex> lock(mutex_);
  inactive_producer_timeout_ = inactive_producer_timeout;
  tombstone_lifetime_ = tombstone_lifetime;
}

bool LookupRegistry::active(const Peer& peer, Clock::time_point now) const {
  return !peer.expires || now - peer.last_update <= inactive_producer_timeout_;
}

bool LookupRegistry::tombstoned(const Producer& producer, Clock::time_point) const {
  return producer.tombstoned && tombstone_now() - producer.tombstoned_at < tombstone_lifetime_;
}

void LookupRegistry::set_clock(std::shared_ptr<ManualClock> clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  clock_ = std::move(clock);
}

std::string LookupRegistry::wrap(const std::string& data) const {
  return wrapped_ ? R"({"status_code":200,"status_txt":"OK","data":)" + data + "}" : data;
}

std::shared_ptr<LookupRegistry::Peer> LookupRegistry::peer_locked(const ProducerInfo& info,
                                                                  bool expires) {
  auto& peer = peers_[info.id()];
  if (!peer) peer = std::make_shared<Peer>();
  peer->info = info;
  peer->last_update = Clock::now();
  peer->expires = expires;
  return peer;
}

bool LookupRegistry::add_producer_locked(const Key& key, const std::shared_ptr<Peer>& peer) {
  Producers& producers = registrations_[key];
  const std::string id = peer->info.id();
  const bool known = std::any_of(producers.begin(), producers.end(),
                                 [&](const Producer& p) { return p.peer->info.id() == id; });
  if (!known) producers.push_back(Producer{peer, false, {}});
  return !known;
}

std::size_t LookupRegistry::remove_producer_locked(const Key& key, const std::string& id,
                                                   bool& removed) {
  removed = false;
  auto found = registrations_.find(key);
  if (found == registrations_.end()) return 0;
  Producers& producers = found->second;
  const auto end = std::remove_if(producers.begin(), producers.end(),
                                  [&](const Producer& p) { return p.peer->info.id() == id; });
  removed = end != producers.end();
  producers.erase(end, producers.end());
  return producers.size();  // the registration stays, as nsqlookupd leaves it
}

// nsqlookupd's UNREGISTER: a channel, or a topic with every channel of it; an ephemeral one goes
// with its last producer.
void LookupRegistry::unregister_locked(const std::string& id, const std::string& topic,
                                       const std::string& channel) {
  bool removed = false;
  if (!channel.empty()) {
    const Key key{"channel", topic, channel};
    if (remove_producer_locked(key, id, removed) == 0 && is_ephemeral(channel)) {
      registrations_.erase(key);
    }
    return;
  }
  for (auto& [key, producers] : registrations_) {
    if (key.category == "channel" && key.key == topic) remove_producer_locked(key, id, removed);
  }
  const Key key{"topic", topic, ""};
  if (remove_producer_locked(key, id, removed) == 0 && is_ephemeral(topic)) {
    registrations_.erase(key);
  }
}

void LookupRegistry::identify(const ProducerInfo& peer, bool expires) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_producer_locked(Key{"client", "", ""}, peer_locked(peer, expires));
}

void LookupRegistry::register_producer(const std::string& id, const std::string& topic,
                                       const std::string& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto peer = peers_.find(id);
  if (peer == peers_.end()) return;
  if (!channel.empty()) add_producer_locked(Key{"channel", topic, channel}, peer->second);
  add_producer_locked(Key{"topic", topic, ""}, peer->second);
}

void LookupRegistry::unregister_producer(const std::string& id, const std::string& topic,
                                         const std::string& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  unregister_locked(id, topic, channel);
}

void LookupRegistry::ping(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto peer = peers_.find(id);
  if (peer != peers_.end()) peer->second->last_update = Clock::now();
}

void LookupRegistry::remove_producer(const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool removed = false;
  for (auto& [key, producers] : registrations_) remove_producer_locked(key, producer_id, removed);
  peers_.erase(producer_id);
}

void LookupRegistry::add_topic_producer(const std::string& topic, const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_producer_locked(Key{"topic", topic, ""}, peer_locked(producer, false));
}

void LookupRegistry::remove_topic_producer(const std::string& topic,
                                           const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  unregister_locked(producer_id, topic, "");
}

void LookupRegistry::add_channel_producer(const std::string& topic, const std::string& channel,
                                          const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_producer_locked(Key{"channel", topic, channel}, peer_locked(producer, false));
}

void LookupRegistry::remove_channel_producer(const std::string& topic, const std::string& channel,
                                             const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  unregister_locked(producer_id, topic, channel);
}

void LookupRegistry::add_node(const ProducerInfo& producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_producer_locked(Key{"client", "", ""}, peer_locked(producer, false));
}

void LookupRegistry::remove_node_if_unlisted(const std::string& producer_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, producers] : registrations_) {
    if (key.category != "topic") continue;
    for (const Producer& p : producers) {
      if (p.peer->info.id() == producer_id) return;
    }
  }
  bool removed = false;
  remove_producer_locked(Key{"client", "", ""}, producer_id, removed);
  peers_.erase(producer_id);
}

void LookupRegistry::create_topic(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  registrations_[Key{"topic", topic, ""}];
}

void LookupRegistry::remove_topic(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = registrations_.begin(); it != registrations_.end();) {
    const bool of_topic = (it->first.category == "channel" || it->first.category == "topic") &&
                          it->first.key == topic;
    it = of_topic ? registrations_.erase(it) : std::next(it);
  }
}

void LookupRegistry::create_channel(const std::string& topic, const std::string& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  registrations_[Key{"channel", topic, channel}];
  registrations_[Key{"topic", topic, ""}];
}

bool LookupRegistry::delete_channel(const std::string& topic, const std::string& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  return registrations_.erase(Key{"channel", topic, channel}) > 0;
}

void LookupRegistry::tombstone(const std::string& topic, const std::string& node) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = registrations_.find(Key{"topic", topic, ""});
  if (found == registrations_.end()) return;
  for (Producer& producer : found->second) {
    const ProducerInfo& info = producer.peer->info;
    if (info.broadcast_address + ":" + std::to_string(info.http_port) == node) {
      producer.tombstoned = true;
      producer.tombstoned_at = tombstone_now();
    }
  }
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
  const auto found = registrations_.find(Key{"topic", topic, ""});
  if (found == registrations_.end()) {
    return LookupResult{
        404, wrapped_ ? R"({"status_code":404,"status_txt":"TOPIC_NOT_FOUND","data":null})"
                      : R"({"message":"TOPIC_NOT_FOUND"})"};
  }
  std::vector<std::string> channels;
  for (const auto& [key, producers] : registrations_) {
    if (key.category == "channel" && key.key == topic) channels.push_back(key.subkey);
  }
  const auto now = Clock::now();
  std::string data = "{\"channels\":" + go_json_string_array(channels) + ",\"producers\":[";
  bool first = true;
  for (const Producer& producer : found->second) {
    if (!active(*producer.peer, now) || tombstoned(producer, now)) continue;
    if (!first) data += ',';
    first = false;
    data += "{" + peer_fields(producer.peer->info) + "}";
  }
  data += "]}";
  return LookupResult{200, wrap(data)};
}

LookupResult LookupRegistry::nodes() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  std::string data = "{\"producers\":[";
  bool first = true;
  const auto clients = registrations_.find(Key{"client", "", ""});
  if (clients != registrations_.end()) {
    for (const Producer& client : clients->second) {
      if (!active(*client.peer, now)) continue;  // tombstoned nodes stay listed
      const std::string id = client.peer->info.id();
      std::vector<std::string> topics;
      std::string tombstones = "[";
      for (const auto& [key, producers] : registrations_) {
        if (key.category != "topic") continue;
        for (const Producer& p : producers) {
          if (p.peer->info.id() != id) continue;
          if (!topics.empty()) tombstones += ',';
          topics.push_back(key.key);
          tombstones += tombstoned(p, now) ? "true" : "false";
          break;
        }
      }
      tombstones += "]";
      if (!first) data += ',';
      first = false;
      data += "{" + peer_fields(client.peer->info) + ",\"tombstones\":" + tombstones +
              ",\"topics\":" + go_json_string_array(topics) + "}";
    }
  }
  data += "]}";
  return LookupResult{200, wrap(data)};
}

LookupResult LookupRegistry::topics() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [key, producers] : registrations_) {
    if (key.category == "topic") names.push_back(key.key);
  }
  return LookupResult{200, wrap("{\"topics\":" + go_json_string_array(names) + "}")};
}

LookupResult LookupRegistry::channels(const std::string& topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [key, producers] : registrations_) {
    if (key.category == "channel" && key.key == topic) names.push_back(key.subkey);
  }
  return LookupResult{200, wrap("{\"channels\":" + go_json_string_array(names) + "}")};
}

}  // namespace polybus::nsq::testing::detail
