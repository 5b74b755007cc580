// What the test nsqlookupd knows: topics, their channels and the nsqd producers of each, kept as
// nsqlookupd keeps its registrations. Shared between the Lookupd's HTTP thread and any Nsqd that
// registered with it, hence the lock; it outlives whichever of them goes first.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace polybus::nsq::testing::detail {

struct ProducerInfo {
  std::string remote_address;
  std::string hostname;
  std::string broadcast_address;
  std::uint16_t tcp_port = 0;
  std::uint16_t http_port = 0;
  std::string version = "1.3.0";

  // nsqlookupd tells producers apart by their address.
  std::string id() const { return broadcast_address + ":" + std::to_string(tcp_port); }
};

struct LookupResult {
  int status = 200;
  std::string json;
};

class LookupRegistry {
 public:
  void add_topic_producer(const std::string& topic, const ProducerInfo& producer);
  void remove_topic_producer(const std::string& topic, const std::string& producer_id);
  void add_channel_producer(const std::string& topic, const std::string& channel,
                            const ProducerInfo& producer);
  void remove_channel_producer(const std::string& topic, const std::string& channel,
                               const std::string& producer_id);
  // A producer that went away (its connection to nsqlookupd closed): out of every registration,
  // which themselves stay.
  void remove_producer(const std::string& producer_id);
  void remove_topic(const std::string& topic);

  void set_wrapped(bool wrapped);

  // The answer to GET /lookup?topic=<topic>.
  LookupResult lookup(const std::string& topic);
  // Every nsqd registered, with or without topics (GET /nodes).
  void add_node(const ProducerInfo& producer);
  // Forgets the node when no topic lists it any more (a producer announced by hand).
  void remove_node_if_unlisted(const std::string& producer_id);
  LookupResult nodes();
  std::uint64_t lookup_count() const;

 private:
  struct Registration {
    std::vector<ProducerInfo> producers;  // in the order they registered
  };

  static void add(Registration& registration, const ProducerInfo& producer);
  static bool remove(Registration& registration, const std::string& producer_id);

  mutable std::mutex mutex_;
  std::map<std::string, Registration> topics_;
  std::map<std::string, std::map<std::string, Registration>> channels_;  // topic -> channel
  std::map<std::string, ProducerInfo> nodes_;  // by producer id
  bool wrapped_ = false;
  std::uint64_t lookup_count_ = 0;
};

}  // namespace polybus::nsq::testing::detail
