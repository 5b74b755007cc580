// Publishing to nsqd: PUB, MPUB and DPUB pipelined on one connection per nsqd, completions
// matched in order to nsqd's answers. Connects lazily; uses the first nsqd in the list that is
// up and fails over to the next; while none is reachable, publishes wait until their deadline.
// A publish written to a connection that then dies without an answer fails with
// errc::disconnected: nsqd may or may not have it (at-least-once callers retry).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "connection.hpp"
#include "options.hpp"
#include "polybus/adapter/reconnect.hpp"

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

  Producer(std::shared_ptr<const AdapterContext> context, Settings settings, std::vector<HostPort> nsqds,
           Discover discover = nullptr);
  void publish(PublishWork work);
  void ping(OpCompletion done);
  void close();

 private:
  // A publish, its bodies kept (shared, not copied) until nsqd answers.
  struct Outgoing {
    std::string topic;
    std::vector<Machine::Body> bodies;
    std::chrono::milliseconds defer{0};
    OpCompletion done;
  };
  struct Node {
    HostPort target;
    std::shared_ptr<Connection> connection;
    std::unique_ptr<ReconnectLoop> reconnect;
    std::deque<Outgoing> awaiting;  // written, answer pending, in order
    bool retry_scheduled = false;
  };

  Node* usable_node();
  void send(Node& node, Outgoing& work);
  void flush_waiting();
  void connect_some();
  void set_nodes(std::vector<HostPort> nsqds);
  std::shared_ptr<Connection> make_connection(Node& node);
  void on_response(Node& node, std::string_view body);
  void on_server_error(Node& node, const ServerError& error);
  void on_closed(Node& node, std::error_code ec, const std::string& detail);

  std::shared_ptr<const AdapterContext> context_;
  Settings settings_;
  Discover discover_;
  bool discovering_ = false;
  std::unique_ptr<Reconnector> rediscover_;  // paces discovery while nsqlookupd finds no nsqd
  bool rediscover_pending_ = false;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::deque<Outgoing> waiting_;  // no nsqd ready yet, or to send again
  bool closed_ = false;
};

}  // namespace polybus::nsq
