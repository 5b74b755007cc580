// SPDX-License-Identifier: Apache-2.0
// Internal: the mem:// broker's state machine. Thread-safe; one mutex guards everything, and
// session callbacks are invoked under it so that deliveries to one session keep their order
// (callbacks only post to the client's strand, they never call back into the broker).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "polybus/adapter/payloads.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/mem.hpp"
#include "polybus/metrics.hpp"

namespace polybus::mem {

using Clock = std::chrono::steady_clock;

struct Delivery {
  std::uint64_t subscription = 0;  // the client's id for its subscription
  std::uint64_t delivery_id = 0;   // names this delivery in ack/nack/touch/reply
  std::uint64_t offset = 0;        // position in the topic log (requests: 0)
  std::shared_ptr<const std::string> payload;
  std::uint32_t attempts = 1;
  std::int64_t timestamp_ns = 0;
  bool request = false;
};

struct SessionCallbacks {
  std::function<void(Delivery)> deliver;
  std::function<void(std::uint64_t request_id, std::error_code ec, std::string payload,
                     std::string detail)>
      reply;
  std::function<void()> disconnected;  // the broker dropped the session (stop or restart)
};

class BrokerImpl : public std::enable_shared_from_this<BrokerImpl> {
 public:
  BrokerImpl();
  ~BrokerImpl();

  // 0 when the broker is stopped.
  std::uint64_t connect(SessionCallbacks callbacks, std::chrono::milliseconds msg_timeout);
  void disconnect(std::uint64_t session);

  std::error_code publish(std::uint64_t session, const std::string& topic, Payloads& payloads,
                          std::chrono::milliseconds defer);
  std::error_code subscribe(std::uint64_t session, std::uint64_t sub, const std::string& topic,
                            const std::string& group, std::optional<std::uint64_t> from,
                            std::uint32_t max_in_flight);
  // delete_group: the group goes away with its last member (anonymous subscriptions).
  std::error_code unsubscribe(std::uint64_t session, std::uint64_t sub, bool delete_group);
  std::error_code set_max_in_flight(std::uint64_t session, std::uint64_t sub, std::uint32_t n);
  std::error_code ack(std::uint64_t session, std::uint64_t delivery);
  std::error_code nack(std::uint64_t session, std::uint64_t delivery,
                       std::chrono::milliseconds delay);
  std::error_code touch(std::uint64_t session, std::uint64_t delivery);

  std::error_code serve(std::uint64_t session, std::uint64_t sub, const std::string& topic,
                        std::uint32_t max_in_flight);
  std::error_code request(std::uint64_t session, std::uint64_t request_id, const std::string& topic,
                          const std::string& payload);
  std::error_code reply(std::uint64_t session, std::uint64_t delivery, std::string payload,
                        std::error_code ec, std::string detail);
  bool alive(std::uint64_t session) const;

  void stop();
  void start();
  bool running() const;
  void set_retention(std::size_t messages);
  // Timers (ack timeouts, nack delays, deferred publishes) on `clock` from here on; null: the
  // real clock.
  void set_clock(std::shared_ptr<ManualClock> clock);
  // Called under the broker's lock for every operation; it must not call back into the broker.
  void set_observer(BrokerObserver observer);
  BrokerStats stats() const;
  metrics::BrokerMetrics metrics() const;
  std::uint64_t topic_size(const std::string& topic) const;

 private:
  struct Stored {
    std::shared_ptr<const std::string> payload;
    std::int64_t timestamp_ns;
  };
  struct Member {
    std::uint64_t session;
    std::uint64_t sub;
    std::uint32_t max_in_flight;
    std::uint32_t in_flight = 0;
  };
  struct Pending {
    std::uint64_t offset;
    std::uint32_t attempts;  // deliveries so far
  };
  struct InFlight {
    std::uint64_t offset;
    std::uint32_t attempts;
    std::uint64_t session;
    std::uint64_t sub;
    Clock::time_point deadline;
  };
  struct Topic;
  struct Group {
    std::uint64_t id;
    std::string name;
    Topic* topic;
    std::uint64_t cursor;
    bool anonymous = false;
    std::deque<Pending> ready;  // redeliveries due now, before new messages
    std::multimap<Clock::time_point, Pending> delayed;
    std::unordered_map<std::uint64_t, InFlight> in_flight;
    std::vector<Member> members;
    std::size_t next_member = 0;
    std::uint64_t delivered = 0, redelivered = 0, acked = 0;
  };
  struct QueuedRequest {
    std::uint64_t session;
    std::uint64_t request_id;
    std::shared_ptr<const std::string> payload;
  };
  struct Topic {
    std::string name;
    std::uint64_t base = 0;  // offset of log.front()
    std::deque<Stored> log;
    std::map<std::string, std::unique_ptr<Group>> groups;
    std::vector<Member> responders;
    std::size_t next_responder = 0;
    std::deque<QueuedRequest> requests;
    std::uint64_t published = 0;  // messages and requests
    std::uint64_t requests_delivered = 0, requests_answered = 0;
    std::uint64_t end() const { return base + log.size(); }
  };
  struct OpenRequest {
    std::uint64_t requester;
    std::uint64_t request_id;
    std::uint64_t responder;
    std::uint64_t sub;
    Topic* topic;
  };
  struct Session {
    SessionCallbacks callbacks;
    std::chrono::milliseconds msg_timeout;
  };
  // deliver_later: a delivery held by a delay fault; drop_session: one a fault on a delivery
  // closes, dropped after the dispatch that made it (group_or_delivery is the session).
  enum class TimerKind {
    ack_timeout,
    delayed_ready,
    deferred_publish,
    deliver_later,
    drop_session
  };
  struct Timer {
    Clock::time_point at;
    TimerKind kind;
    std::uint64_t group_or_delivery;
    std::string topic;
    std::shared_ptr<const std::string> payload;
    std::optional<Delivery> delivery = std::nullopt;  // deliver_later's
    std::uint64_t session = 0;                        // deliver_later's
    bool operator>(const Timer& other) const { return at > other.at; }
  };

  Topic& topic_locked(const std::string& name);
  void append_locked(Topic& topic, std::shared_ptr<const std::string> payload);
  void dispatch_locked(Group& group);
  void dispatch_requests_locked(Topic& topic);
  void requeue_locked(Group& group, std::uint64_t delivery, std::chrono::milliseconds delay);
  Member* member_locked(Group& group, std::uint64_t session, std::uint64_t sub);
  void drop_session_locked(std::uint64_t session, bool notify);
  void schedule_locked(Timer timer);
  // An ack's, nack's or touch's BrokerEvent, with its delivery's topic and group when known.
  BrokerEvent settle_observed(std::uint64_t session, std::string_view kind, std::uint64_t delivery,
                              std::int64_t count) const;
  BrokerFault observe_locked(const BrokerEvent& observed) const {
    return observer_ ? observer_(observed) : BrokerFault{};
  }
  // What a fault on an operation a session asked for makes of it: its error, or none to go on
  // (`done` set when the operation is to be left undone: swallowed, or the session dropped).
  std::error_code fault_on_request_locked(std::uint64_t session, const BrokerFault& fault,
                                          bool& done);
  // Hands `delivery` to `session`, as a fault on deliveries to it says.
  void hand_over_locked(std::uint64_t session, const Delivery& delivery, std::string_view topic,
                        std::string_view group);
  // The timers' time: the real clock's, or clock_'s.
  Clock::time_point now_locked() const { return clock_ ? clock_->now() : Clock::now(); }
  // On a ManualClock: fires every timer that is due now (its callbacks run this).
  void fire_due();
  void timer_loop();
  void fire_locked(Timer& timer);

  mutable std::mutex mutex_;
  std::condition_variable timer_wake_;
  bool running_ = true;
  bool shutting_down_ = false;
  std::size_t retention_ = 1'000'000;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, Session> sessions_;
  std::map<std::string, std::unique_ptr<Topic>> topics_;
  std::unordered_map<std::uint64_t, Group*> groups_by_id_;
  std::unordered_map<std::uint64_t, Group*> delivery_group_;  // in-flight delivery -> group
  std::unordered_map<std::uint64_t, OpenRequest> open_requests_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::shared_ptr<ManualClock> clock_;  // null: the timer thread waits on the real clock
  BrokerObserver observer_;
  BrokerStats stats_;
  std::uint64_t sessions_accepted_ = 0;
  std::thread timer_thread_;
};

}  // namespace polybus::mem
