// SPDX-License-Identifier: Apache-2.0
// What the test nsqlookupd knows, kept as nsqlookupd 1.3's RegistrationDB keeps it: registrations
// ("client", "topic" T, "channel" T/C) each with the producers (nsqd peers) that announced them.
// Peers come over nsqlookupd's TCP protocol (a connection each, known by its remote address, kept
// alive by PING) or in process (Nsqd::register_with, Lookupd::add_producer: never inactive). The
// HTTP answers are built here. Shared between the Lookupd's io thread and any in-process Nsqd
// registered with it, hence the lock; it outlives whichever of them goes first.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "polybus/manual_clock.hpp"

namespace polybus::nsq::testing::detail {

struct ProducerInfo {
  std::string remote_address;
  std::string hostname;
  std::string broadcast_address;
  std::uint16_t tcp_port = 0;
  std::uint16_t http_port = 0;
  std::string version = "1.3.0";
  // nsqlookupd's peer id: the registering connection's remote address. Empty for a peer
  // registered in process, which is known by broadcast_address:tcp_port.
  std::string connection_id;

  std::string id() const {
    return connection_id.empty() ? broadcast_address + ":" + std::to_string(tcp_port)
                                 : connection_id;
  }
};

struct LookupResult {
  int status = 200;
  std::string json;
};

class LookupRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // nsqlookupd's --inactive-producer-timeout and --tombstone-lifetime.
  // Tombstones' lifetimes on `clock` (null: the real clock); liveness stays on the real clock.
  void set_clock(std::shared_ptr<ManualClock> clock);
  void set_timing(std::chrono::milliseconds inactive_producer_timeout,
                  std::chrono::milliseconds tombstone_lifetime);

  // The TCP protocol's commands, for the peer `id` (IDENTIFY registers it as a "client").
  void identify(const ProducerInfo& peer, bool expires);
  void register_producer(const std::string& id, const std::string& topic,
                         const std::string& channel);  // channel "" for the topic alone
  void unregister_producer(const std::string& id, const std::string& topic,
                           const std::string& channel);
  void ping(const std::string& id);
  // The peer's connection closed: out of every registration, which themselves stay.
  void remove_producer(const std::string& producer_id);

  // In-process registration (Nsqd::register_with, Lookupd::add_producer), in the same terms.
  void add_topic_producer(const std::string& topic, const ProducerInfo& producer);
  void remove_topic_producer(const std::string& topic, const std::string& producer_id);
  void add_channel_producer(const std::string& topic, const std::string& channel,
                            const ProducerInfo& producer);
  void remove_channel_producer(const std::string& topic, const std::string& channel,
                               const std::string& producer_id);
  void add_node(const ProducerInfo& producer);
  // Forgets the node when no topic lists it any more (a producer announced by hand).
  void remove_node_if_unlisted(const std::string& producer_id);

  // The HTTP API's actions.
  void create_topic(const std::string& topic);
  void remove_topic(const std::string& topic);  // and its channels
  void create_channel(const std::string& topic, const std::string& channel);
  bool delete_channel(const std::string& topic, const std::string& channel);
  // Tombstones the topic's producers whose broadcast_address:http_port is `node`.
  void tombstone(const std::string& topic, const std::string& node);

  void set_wrapped(bool wrapped);

  // The answers of GET /lookup, /nodes, /topics, /channels.
  LookupResult lookup(const std::string& topic);
  LookupResult nodes();
  LookupResult topics();
  LookupResult channels(const std::string& topic);
  std::uint64_t lookup_count() const;

 private:
  struct Peer {
    ProducerInfo info;
    Clock::time_point last_update;
    bool expires = true;
  };
  struct Producer {
    std::shared_ptr<Peer> peer;
    bool tombstoned = false;
    Clock::time_point tombstoned_at;
  };
  struct Key {
    std::string category, key, subkey;
    bool operator<(const Key& other) const {
      return std::tie(category, key, subkey) < std::tie(other.category, other.key, other.subkey);
    }
  };
  using Producers = std::vector<Producer>;  // in the order they registered

  bool add_producer_locked(const Key& key, const std::shared_ptr<Peer>& peer);
  std::size_t remove_producer_locked(const Key& key, const std::string& id, bool& removed);
  void unregister_locked(const std::string& id, const std::string& topic,
                         const std::string& channel);
  std::shared_ptr<Peer> peer_locked(const ProducerInfo& info, bool expires);
  bool active(const Peer& peer, Clock::time_point now) const;
  bool tombstoned(const Producer& producer, Clock::time_point now) const;
  std::string wrap(const std::string& data) const;

  mutable std::mutex mutex_;
  std::map<Key, Producers> registrations_;
  std::map<std::string, std::shared_ptr<Peer>> peers_;  // by id, while registered somewhere
  std::chrono::milliseconds inactive_producer_timeout_{300000};
  std::chrono::milliseconds tombstone_lifetime_{45000};
  std::shared_ptr<ManualClock> clock_;
  Clock::time_point tombstone_now() const { return clock_ ? clock_->now() : Clock::now(); }
  bool wrapped_ = false;
  std::uint64_t lookup_count_ = 0;
};

}  // namespace polybus::nsq::testing::detail
