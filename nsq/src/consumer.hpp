// SPDX-License-Identifier: Apache-2.0
// One subscription (topic, channel): a connection to every nsqd that has the topic, RDY spread
// over them within max_in_flight and each nsqd's max_rdy_count, go-nsq's backoff after failed
// messages, FIN/REQ/TOUCH for the messages it delivered, and a clean close (RDY 0, CLS,
// CLOSE_WAIT, in-flight messages finished or the deadline, close).
#pragma once

#include <asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <unordered_set>

#include "connection.hpp"
#include "dial_budget.hpp"
#include "dial_pacer.hpp"
#include "in_flight_window.hpp"
#include "lookupd_client.hpp"
#include "options.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/io/reconnect.hpp"
#include "random_seed.hpp"

namespace polybus::nsq {

class Consumer : public AdapterSubscription,
                 public MessageBackend,
                 public std::enable_shared_from_this<Consumer> {
 public:
  struct Discovery {
    std::vector<HostPort> nsqds;     // fixed list (nsq://), reconnected with backoff
    std::vector<HostPort> lookupds;  // or nsqlookupd HTTP addresses (nsq+lookupd://)
  };

  Consumer(std::shared_ptr<const AdapterContext> context, Settings settings, std::string topic,
           std::string channel, std::uint32_t max_in_flight, Discovery discovery,
           std::shared_ptr<SubscriptionSink> sink);
  void start();
  // Ends the subscription: RDY 0, CLS, wait for in-flight messages until the deadline, close.
  void stop(Clock::time_point deadline, std::function<void()> done);

  // AdapterSubscription
  void unsubscribe(OpCompletion done) override;
  void pause() override;
  void resume() override;
  void set_max_in_flight(std::uint32_t n) override;
  // Half the shortest msg_timeout negotiated: nsqd sends a message again once it passes.
  std::chrono::milliseconds held_touch_interval() const override;
  void touch_held(const std::vector<Message>& held) override;

  // MessageBackend
  void ack(detail::MessageState& message) override;
  void nack(detail::MessageState& message, std::chrono::milliseconds delay) override;
  void touch(detail::MessageState& message) override;
  void reply(detail::MessageState& message, std::string, std::error_code, std::string) override;

 private:
  struct Conn {
    std::uint64_t key = 0;  // unique per connection attempt: messages name their connection
    HostPort target;
    std::shared_ptr<Connection> connection;
    std::unique_ptr<ReconnectLoop> reconnect;
    std::uint32_t rdy = 0;  // last RDY sent
    // The largest RDY sent on this connection: nsqd never has more messages in flight on it,
    // so more is a server ignoring RDY (a protocol error, not a buffer to grow).
    std::uint32_t rdy_ceiling = 0;
    bool dialing = false;  // a discovery dial not yet subscribed (counts against the dial cap)
    WidenedDial widened;   // a dial beyond max_concurrent_dials, while dials time out
    std::uint32_t max_rdy = 2500;     // negotiated
    std::size_t in_flight = 0;        // delivered, not yet finished or requeued
    InFlightWindow recent_in_flight;  // of those, the ones nsqd may still count (the RDY check)
    bool subscribed = false;
    bool closing = false;   // CLS sent
    bool retiring = false;  // lookupd no longer lists it: close once drained
  };
  enum class Signal { success, failure };

  Conn& add_conn(const HostPort& target);
  void connect(Conn& conn);
  void on_ready(Conn& conn);
  void on_message(Conn& conn, const MessageView& message, const std::shared_ptr<const void>& owner);
  // nsqd refusals that no retry can change, for a subscription not yet confirmed.
  static bool refuses_for_good(errc code);
  void on_response(Conn& conn, std::string_view body);
  void on_closed(Conn& conn, std::error_code ec, const std::string& detail);
  void remove_conn(std::uint64_t key);
  Conn* find_conn(std::uint64_t key);
  // Its message's connection, when that is still the one up (not ended, not replaced).
  Conn* live_conn_of(const detail::MessageState& message);
  template <typename Fn>
  void respond(detail::MessageState& message, const char* what, Fn fn);
  // A FIN or REQ went out (or could not): the message no longer counts as in flight.
  void answered(const detail::MessageState& message);

  void update_rdy();
  void send_rdy(Conn& conn, std::uint32_t count);
  void signal(Signal signal);
  void backoff_done();
  void redistribute();
  void poll_lookupd();
  void on_lookup(std::size_t pending_id, std::vector<HostPort> found, bool any_answer);
  void pump_dials();  // start queued discovery dials within the caps
  void check_stopped();

  std::shared_ptr<const AdapterContext> context_;
  Settings settings_;
  std::string topic_;
  std::shared_ptr<const std::string> shared_topic_;  // topic_, shared with each message
  std::string channel_;
  std::uint32_t max_in_flight_;
  Discovery discovery_;
  std::shared_ptr<SubscriptionSink> sink_;
  std::map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::uint64_t next_key_ = 0;
  // Discovery's choice among what nsqlookupd lists. A dial that fails is replaced at once by
  // one not tried yet: the failed are remembered until nsqlookupd's answer changes (or every
  // producer listed has failed), so that a live nsqd among thousands of dead ones is reached in
  // one pass over the list, whatever its order.
  std::deque<HostPort> dial_queue_;  // found by discovery, not yet dialled (shuffled)
  std::size_t dialing_ = 0;
  // The last discovery dial that failed timed out (a silent nsqd, not a refusing one): dials go
  // beyond max_concurrent_dials, within the process's DialBudget.
  bool dials_time_out_ = false;
  std::unordered_set<std::string> failed_dials_;  // since the answer last changed
  std::vector<std::string> last_answer_;          // nsqlookupd's producers, sorted
  bool paused_ = false;
  std::optional<Clock::time_point> touching_since_;  // the first touch_held of this pause
  bool stopping_ = false;
  bool ready_reported_ = false;
  // Backoff (as go-nsq): failures count up, successes down; while the count is above zero every
  // connection gets RDY 0 for the policy's delay at that level, then one connection RDY 1 to test.
  Backoff rdy_backoff_;
  std::uint32_t backoff_counter_ = 0;
  bool backoff_waiting_ = false;
  std::uint64_t test_conn_ = 0;
  ClockTimer backoff_timer_;  // on the client's clock, as the policy's delays
  asio::steady_timer redistribute_timer_;
  ClockTimer poll_timer_;  // on the client's clock: a test moves a poll forward

  DialPacer dial_pacer_;           // max_dials_per_second
  asio::steady_timer stop_timer_;  // the real clock, as close()'s deadline
  std::size_t rotation_ = 0;       // which connections hold RDY when max_in_flight < connections
  std::size_t lookup_round_ = 0;
  std::function<void()> stopped_;
  std::mt19937 random_{engine_seed()};
};

}  // namespace polybus::nsq
