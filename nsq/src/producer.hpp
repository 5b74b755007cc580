// SPDX-License-Identifier: Apache-2.0
// Publishing to nsqd: PUB, MPUB and DPUB pipelined on one connection per nsqd, completions
// matched in order to nsqd's answers. Connects at the first publish. With several nsqd the
// publish_strategy picks one per publish (a batch stays on one): the fewest unconfirmed, each in
// turn, or the first up (failover); a failed nsqd is left out, dialled again with the reconnect
// backoff and back in once it answers. While none is reachable, publishes wait until their
// deadline. What a connection that dies had unanswered is sent again on another (nsqd may have
// it already: at least once).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "connection.hpp"
#include "dial_budget.hpp"
#include "dial_pacer.hpp"
#include "options.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/adapter/payloads.hpp"
#include "polybus/adapter/publish_node.hpp"
#include "polybus/io/reconnect.hpp"
#include "random_seed.hpp"

namespace polybus::nsq {

class Producer : public std::enable_shared_from_this<Producer> {
 public:
  // discover: for nsq+lookupd, asks nsqlookupd for the nsqd list (called when none is usable).
  // It answers the nsqd found, and when none was: where it asked and why that failed.
  struct Discovered {
    std::vector<HostPort> nsqds;
    std::string where;    // the nsqlookupd addresses asked
    std::string failure;  // each failed answer, named
  };
  using Discover = std::function<void(std::function<void(Discovered)>)>;

  Producer(std::shared_ptr<const AdapterContext> context, Settings settings,
           std::vector<HostPort> nsqds, Discover discover = nullptr);
  void publish(PublishWork work);
  void ping(OpCompletion done);
  void close();

 private:
  // A publish, its bodies kept (shared, not copied) until nsqd answers.
  struct Outgoing {
    TopicName topic;
    Machine::Body body;                 // a single publish (no vector to allocate)
    std::vector<Machine::Body> bodies;  // a batch (MPUB)
    std::chrono::milliseconds defer{0};
    OpCompletion done;
    // Single publishes gathered into this MPUB (publish()): dones[i] is bodies[i]'s, and done
    // is empty.
    std::vector<OpCompletion> dones;
    bool batch = false;  // an MPUB: publish_batch()'s, or gathered
    bool gathered() const { return !dones.empty(); }
  };
  struct Node {
    HostPort target;
    std::shared_ptr<Connection> connection;
    std::unique_ptr<ReconnectLoop> reconnect;  // made at the first dial
    Fifo<Outgoing> awaiting;                   // written, answer pending, in order
    bool retry_scheduled = false;
    bool failed = false;        // its last connection or attempt ended; cleared when it is ready
    bool discovered = false;    // from nsqlookupd's answer
    bool ever_ready = false;    // a connection to it completed the handshake
    std::uint64_t sent = 0;     // messages written: round_robin's turn, least_pending's tie-break
    std::uint64_t pending = 0;  // messages written and not yet answered
    std::shared_ptr<detail::PublishNodeCells> cells;  // its metrics
    WidenedDial widened;  // beyond max_nsqd_connections, dialled while dials time out
  };
  std::shared_ptr<Node> make_node(HostPort target, bool discovered);
  void dial(Node& node);
  // Silent nsqd (dials timing out): more of those not tried yet are dialled at once, within the
  // process's DialBudget.
  void widen_from_untried();
  void node_ready(Node& node);
  // Answered (or lost) messages of `out` on `node`: its counts.
  void settled(Node& node, const Outgoing& out, bool confirmed);
  bool spreads() const { return settings_.publish_strategy != PublishStrategy::failover; }

  Node* usable_node();
  Node* node_with_room();  // usable, with room to write (Transport::write_room)
  std::size_t max_gathered_bytes() const;
  void route(Outgoing work);  // to a ready nsqd, else to wait for one
  void send(Node& node, Outgoing& work);
  void flush_gathered();
  // An answered MPUB's emptied vectors, kept for a later burst to gather into.
  void keep_vectors(Outgoing& answered);
  // Each publish of out completed with ec (success when none).
  static void complete(Outgoing& out, std::error_code ec, const std::string& detail);
  void flush_waiting();
  // Messages came into waiting_ (or left it, negative): the count the metrics show.
  void count_waiting(const Outgoing& out, bool added);
  void connect_some();
  // Adds the nsqd not known yet. discovered: nsqlookupd's answer, whose order means nothing: a
  // random choice of them within max_nsqd_connections, in place of known ones that failed and
  // hold nothing.
  void set_nodes(std::vector<HostPort> nsqds, bool discovered);
  // Asks nsqlookupd: now (no nsqd known yet), or after the reconnect policy's delay (every nsqd
  // known waits out its backoff), so a list of dead nsqd is not asked for in a loop.
  void discover_now();
  void connect_paced();
  void discover_later(const std::string& where, std::error_code reason, const std::string& why);
  void retire(const std::shared_ptr<Node>& node);
  std::shared_ptr<Connection> make_connection(const std::shared_ptr<Node>& node);
  void on_response(Node& node, std::string_view body);
  void on_server_error(Node& node, const ServerError& error);
  void on_closed(Node& node, std::error_code ec, const std::string& detail);

  std::shared_ptr<const AdapterContext> context_;
  Settings settings_;
  Discover discover_;
  bool discovering_ = false;
  // Paces discovery while nsqlookupd finds no nsqd, or only dead ones; reset when one connects.
  std::unique_ptr<Reconnector> rediscover_;
  std::string lookupds_;  // where discovery asks, for state events
  bool rediscover_pending_ = false;
  // Shared with the callbacks of their connections (weakly): a retired node may still be in one.
  std::vector<std::shared_ptr<Node>> nodes_;
  // What nsqlookupd listed beyond max_nsqd_connections, not tried yet (shuffled): a discovered
  // nsqd that fails before its handshake gives way to the next of these at once, so that a live
  // nsqd among thousands of dead ones is reached in one pass, whatever the answer's order.
  std::deque<HostPort> untried_;
  DialPacer dial_pacer_;              // those replacements, at most max_dials_per_second
  std::deque<Outgoing> waiting_;      // no nsqd ready yet, or to send again
  std::size_t waiting_messages_ = 0;  // the messages in waiting_, for the metrics
  // Single publishes to one topic arriving in one turn of the strand (a burst taken from the
  // client's intake), sent as one MPUB at its end: nsqd answers and flushes once for them all
  // instead of once each, which was most of its CPU per message.
  Outgoing gathering_;
  std::size_t gathering_bytes_ = 0;
  SharedPayloadBlocks payload_blocks_;  // for the large payloads kept until nsqd answers
  struct SpareVectors {
    std::vector<Machine::Body> bodies;
    std::vector<OpCompletion> dones;
  };
  // What keep_vectors() kept, so that gathering allocates nothing per burst: as many as the
  // most publishes written and unanswered at once on a connection (answers come back in runs,
  // and each run's vectors serve the bursts gathered meanwhile), at least 8, at most 64. The
  // bursts in flight hold their payloads as well, so the spares add a fraction of what they do.
  static constexpr std::size_t kSpareVectorsAtLeast = 8;
  static constexpr std::size_t kSpareVectorsAtMost = 64;
  std::size_t most_awaiting_ = 0;
  std::vector<SpareVectors> spare_vectors_;
  std::size_t largest_burst_ = 0;  // publishes gathered into one MPUB (at most kMaxGathered)
  bool gather_flush_posted_ = false;
  HandlerMemory gather_flush_memory_;  // for that one post: asio's own cache missed it often
  bool closed_ = false;
  std::mt19937 random_{engine_seed()};
};

}  // namespace polybus::nsq
