// SPDX-License-Identifier: Apache-2.0
// The broker behind the test nsqd: topics, their channels, and the messages in each, with nsqd's
// delivery rules. Everything here runs on the server's io thread.
//
//  * A topic without channels holds what is published to it; its first channel gets all of it.
//    Then each message is copied to every channel (one body shared by all copies).
//  * A channel hands ready messages to its subscribers in turn, each while its messages in flight
//    are fewer than its RDY count. A delivery counts an attempt and starts the subscriber's message
//    timeout; FIN ends it, REQ (with an optional delay) and the timeout put the message back.
//  * A subscriber that goes away leaves its messages in flight until they time out, as in nsqd.
//  * Ephemeral channels ("#ephemeral") go with their last subscriber, and ephemeral topics with
//    their last channel.
//  * A topic or channel keeps mem_queue_size messages in memory, within max_stored_bytes of
//    bodies across the broker, and the rest in a disk queue (disk_queue.hpp), oldest first, as
//    nsqd does; an ephemeral channel drops what does not fit, as nsqd's has no disk queue.
#pragma once

#include <array>
#include <asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "disk_queue.hpp"
#include "polybus/adapter/clock_timer.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing::detail {

using Clock = std::chrono::steady_clock;

// 16 hex characters, as nsqd's ids are on the wire.
struct MessageId {
  std::array<char, 16> text{};
  std::string_view view() const { return {text.data(), text.size()}; }
  bool operator==(const MessageId& other) const { return text == other.text; }
  bool operator<(const MessageId& other) const { return text < other.text; }
  static MessageId from_counter(std::uint64_t value);
  static MessageId from_wire(std::string_view sixteen_bytes);
};

struct MessageIdHash {
  std::size_t operator()(const MessageId& id) const noexcept {
    return std::hash<std::string_view>()(id.view());
  }
};

// Bytes of message bodies held, against NsqdOptions::max_stored_bytes.
struct MemoryAccount {
  std::size_t used = 0;
  std::size_t limit = 0;
};

// What topics and channels may keep in memory, and where the rest goes.
struct QueueRoom {
  std::int64_t mem_queue_size = 10000;
  std::shared_ptr<MemoryAccount> memory;
  DiskFolder* disk = nullptr;
  bool memory_full() const { return memory->used > memory->limit; }
};

// A body shared by a message's copies in every channel; gives its bytes back to the account when
// the last copy goes.
class StoredBody {
 public:
  StoredBody(std::string bytes, std::shared_ptr<MemoryAccount> account);
  ~StoredBody();
  StoredBody(const StoredBody&) = delete;
  StoredBody& operator=(const StoredBody&) = delete;
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::shared_ptr<MemoryAccount> account_;
};

struct Message {
  MessageId id;
  std::shared_ptr<const StoredBody> body;
  std::int64_t timestamp_ns = 0;       // when published, ns since the Unix epoch
  std::uint16_t attempts = 0;          // deliveries so far
  std::chrono::milliseconds defer{0};  // DPUB's delay, while the topic has no channel
};

// Messages waiting their turn, oldest first: in memory, and once memory had no room for one
// (mem_queue_size, max_stored_bytes) on disk until the disk queue empties.
class WaitingMessages {
 public:
  WaitingMessages(QueueRoom& room, std::string backend_name)
      : room_(room), backend_name_(std::move(backend_name)) {}

  // A published message: in memory if there is room and none waits on disk, else on disk, or
  // in memory after all if the disk cannot take it (the publish was admitted).
  void put(Message message);
  // One that goes back (a requeue, a timeout, a deferral come due): in memory.
  void put_in_memory(Message message) { memory_.push_back(std::move(message)); }
  // The oldest; nothing when none waits (or the disk queue failed, and said so).
  std::optional<Message> take();
  bool empty() const { return memory_.empty() && !disk_; }
  std::size_t size() const { return memory_.size() + on_disk(); }
  std::size_t in_memory() const { return memory_.size(); }
  std::size_t on_disk() const { return disk_ ? disk_->depth() : 0; }
  void clear();

 private:
  QueueRoom& room_;
  std::string backend_name_;
  std::deque<Message> memory_;
  std::unique_ptr<DiskQueue> disk_;  // while it holds any: all newer than memory_'s
};

// A connection subscribed to a channel, as the channel sees it.
class Subscriber {
 public:
  virtual ~Subscriber() = default;
  virtual std::uint64_t client_id() const = 0;
  // Subscribed, not closing, and fewer messages in flight than its RDY count.
  virtual bool ready_for_message() const = 0;
  // The RDY count it last set.
  virtual std::int64_t ready_count() const = 0;
  // True when the client's sample rate drops this message (nsqd drops it for the channel).
  virtual bool sampled_out() = 0;
  virtual std::chrono::milliseconds message_timeout() const = 0;
  // Sends the message frame and counts one more in flight.
  virtual void deliver(const Message& message) = 0;
  // One of its messages timed out: one fewer in flight.
  virtual void message_timed_out() = 0;
  // The channel was emptied (nsqd's /channel/empty): none of its messages is in flight any more.
  virtual void channel_emptied() = 0;
  // The channel is being deleted: forget it and close, as nsqd closes the channel's clients.
  virtual void channel_deleted() = 0;
};

// Told when topics and channels come and go, to keep an nsqlookupd informed, and when a timer
// changed what tests may be waiting for.
class BrokerListener {
 public:
  virtual ~BrokerListener() = default;
  virtual void state_changed() = 0;
  virtual void topic_created(const std::string& topic) = 0;
  virtual void topic_deleted(const std::string& topic) = 0;
  virtual void channel_created(const std::string& topic, const std::string& channel) = 0;
  virtual void channel_deleted(const std::string& topic, const std::string& channel) = 0;
};

class Channel {
 public:
  // `backend_name` names its disk queue's files (nsqd's "topic:channel").
  Channel(std::string name, std::string backend_name, QueueRoom& room);

  const std::string& name() const { return name_; }
  bool ephemeral() const { return ephemeral_; }

  // A published message (WaitingMessages::put; an ephemeral channel drops what memory cannot
  // take, as nsqd's has no disk queue).
  void put(Message message);
  void put_deferred(Message message, Clock::time_point due);

  // A paused channel keeps its messages and delivers none (in-flight ones still finish).
  bool paused() const { return paused_; }
  void set_paused(bool paused) { paused_ = paused; }
  // Drops every message, ready, deferred and in flight (nsqd's Channel.Empty).
  void empty();
  const std::vector<Subscriber*>& subscribers() const { return subscribers_; }

  void add_subscriber(Subscriber* subscriber);
  void remove_subscriber(Subscriber* subscriber);
  std::size_t subscriber_count() const { return subscribers_.size(); }

  // "" on success, else nsqd's reason: "ID not in flight" or "client does not own message".
  std::string finish(std::uint64_t client_id, const MessageId& id);
  std::string requeue(std::uint64_t client_id, const MessageId& id, std::chrono::milliseconds delay,
                      Clock::time_point now);
  // Extends the message's timeout by the client's msg_timeout from now, but never past
  // `max_msg_timeout` after its delivery.
  std::string touch(std::uint64_t client_id, const MessageId& id, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds max_msg_timeout, Clock::time_point now);

  // Hands ready messages to subscribers that can take them, in turn.
  void dispatch(Clock::time_point now);
  // Messages whose timeout passed go back to the ready queue, deferred ones that are due join it.
  void process_due(Clock::time_point now);
  std::optional<Clock::time_point> next_deadline() const;
  // On stop: every message in flight goes back to the ready queue, as nsqd writes them to disk.
  void return_in_flight();

  // Ready messages, in memory and on disk (nsqd's depth), and those on disk (backend_depth).
  std::size_t depth() const { return ready_.size(); }
  std::size_t backend_depth() const { return ready_.on_disk(); }
  std::size_t in_flight() const { return in_flight_.size(); }
  std::size_t deferred() const { return deferred_.size(); }
  std::uint64_t timeout_count() const { return timeout_count_; }
  std::uint64_t requeue_count() const { return requeue_count_; }
  // Deliveries (a redelivery is one whose message had been delivered before), and FINs.
  std::uint64_t delivered_count() const { return delivered_count_; }
  std::uint64_t redelivered_count() const { return redelivered_count_; }
  std::uint64_t finish_count() const { return finish_count_; }
  // Messages put into the channel, deferred ones included (nsqd's message_count).
  std::uint64_t message_count() const { return message_count_; }
  // The delay each REQ asked for, after nsqd's clamp, in order (the last kKeptHistory).
  const std::deque<std::chrono::milliseconds>& requeue_delays() const { return requeue_delays_; }
  // The largest RDY count a subscriber of this channel has set.
  void note_ready_count(std::int64_t count) {
    max_ready_count_ = std::max(max_ready_count_, count);
    ready_counts_set_.push_back(count);
    if (ready_counts_set_.size() > kKeptHistory) ready_counts_set_.pop_front();
  }
  std::int64_t max_ready_count() const { return max_ready_count_; }
  // Every RDY count its subscribers set, in order (the last kKeptHistory).
  const std::deque<std::int64_t>& ready_counts_set() const { return ready_counts_set_; }
  // The RDY counts its subscribers have set now, summed.
  std::int64_t ready_count() const {
    std::int64_t sum = 0;
    for (const Subscriber* s : subscribers_) sum += s->ready_count();
    return sum;
  }

 private:
  struct InFlight {
    Message message;
    std::uint64_t client_id = 0;
    Clock::time_point deadline;
    Clock::time_point delivered;
  };

  Subscriber* next_ready_subscriber();
  std::unordered_map<MessageId, InFlight, MessageIdHash>::iterator find_owned(
      std::uint64_t client_id, const MessageId& id, std::string& error);
  void forget_deadline(const InFlight& entry, const MessageId& id);

  std::string name_;
  QueueRoom& room_;
  bool ephemeral_;
  bool paused_ = false;
  std::uint64_t message_count_ = 0;
  std::int64_t max_ready_count_ = 0;
  WaitingMessages ready_;
  std::unordered_map<MessageId, InFlight, MessageIdHash> in_flight_;
  std::set<std::pair<Clock::time_point, MessageId>> in_flight_deadlines_;
  std::multimap<Clock::time_point, Message> deferred_;
  std::vector<Subscriber*> subscribers_;
  std::size_t next_subscriber_ = 0;
  std::uint64_t timeout_count_ = 0;
  std::uint64_t requeue_count_ = 0;
  std::uint64_t delivered_count_ = 0;
  std::uint64_t redelivered_count_ = 0;
  std::uint64_t finish_count_ = 0;
  static constexpr std::size_t kKeptHistory = 1024;
  std::deque<std::chrono::milliseconds> requeue_delays_;
  std::deque<std::int64_t> ready_counts_set_;
};

class Topic {
 public:
  Topic(std::string name, QueueRoom& room);
  const std::string& name() const { return name_; }
  bool ephemeral() const { return ephemeral_; }

  std::map<std::string, std::unique_ptr<Channel>>& channels() { return channels_; }
  const std::map<std::string, std::unique_ptr<Channel>>& channels() const { return channels_; }
  Channel* find_channel(const std::string& name) const;

  // Held while the topic has no channel, is paused or starting: in memory, or on disk past
  // mem_queue_size (a deferred one stays in memory, with its delay).
  void put_pending(Message message);
  bool has_pending() const { return !pending_.empty(); }
  std::optional<Message> take_pending() { return pending_.take(); }
  void clear_pending() { pending_.clear(); }
  std::size_t depth() const { return pending_.size(); }
  std::size_t backend_depth() const { return pending_.on_disk(); }
  std::uint64_t message_count = 0;
  std::uint64_t message_bytes = 0;
  // A paused topic holds what is published to it, channels or not, until it is unpaused.
  bool paused = false;
  // A topic being created holds what is published to it until the channels nsqlookupd knows
  // for it exist (Broker::start_topic), as nsqd's GetTopic waits for them.
  bool starting = false;

 private:
  std::string name_;
  bool ephemeral_;
  WaitingMessages pending_;  // published while the topic had no channel or was paused
  std::map<std::string, std::unique_ptr<Channel>> channels_;
};

class Broker {
 public:
  Broker(asio::io_context& io, const NsqdOptions& options, BrokerListener& listener);
  ~Broker();

  // Gets or creates; a new channel takes what its topic held.
  Topic& topic(const std::string& name);
  Channel& channel(Topic& topic, const std::string& name);
  const Topic* find_topic(const std::string& name) const;
  const Channel* find_channel(const std::string& topic, const std::string& channel) const;
  const std::map<std::string, std::unique_ptr<Topic>>& topics() const { return topics_; }
  // Bytes of message bodies held now.
  std::size_t stored_bytes() const { return account_->used; }
  // Bytes of messages waiting in disk queues now.
  std::uint64_t disk_bytes() const { return disk_.account().used; }

  // Stores the bodies as messages of `topic` (created if need be), deferred by `defer` if set.
  // False, storing nothing, when they would take the broker past max_stored_bytes in memory
  // and past max_disk_bytes on disk.
  bool publish(const std::string& topic, std::vector<std::string> bodies,
               std::chrono::milliseconds defer);

  // nsqd's HTTP administration: pausing and unpausing (an unpaused topic hands what it held to
  // its channels), emptying (a topic's own held messages; a channel's every message), deleting
  // (the channels' clients are closed). False when there is no such topic or channel.
  void set_topic_paused(Topic& topic, bool paused);
  // Creates the channels (ephemeral ones aside) of a starting topic, then hands them what it
  // held. Nothing when the topic is gone.
  void start_topic(const std::string& topic, const std::vector<std::string>& channels);
  void set_channel_paused(Channel& channel, bool paused);
  void empty_topic(Topic& topic);
  void empty_channel(Channel& channel);
  bool delete_topic(const std::string& topic);
  bool delete_channel(Topic& topic, const std::string& channel);
  Topic* find_topic(const std::string& name) {
    auto it = topics_.find(name);
    return it == topics_.end() ? nullptr : it->second.get();
  }

  void subscribe(Channel& channel, Subscriber& subscriber);
  // May delete an ephemeral channel and topic: `channel` is then gone.
  void unsubscribe(Topic& topic, Channel& channel, Subscriber& subscriber);

  // Call after anything that may let a channel deliver (RDY, FIN, REQ, TOUCH) or move a deadline.
  void changed(Channel& channel);

  // On stop: in-flight messages back to their channels.
  void return_in_flight();
  // Cancels the timer, for shutdown.
  void close();
  // The time of the broker's message timers: the real clock's, or NsqdOptions::clock's.
  Clock::time_point now() const { return timer_.now(); }

 private:
  // The timer follows the earliest deadline of any channel (a message in flight timing out, a
  // deferred one coming due), kept in `deadlines_` per channel as each one changes, so that a
  // command on one of 10,000 channels does not look at the other 9,999.
  void reschedule(Channel& channel);
  void reschedule_all();
  void track_deadline(Channel& channel);
  void arm_timer();
  // A channel about to be destroyed leaves the deadlines and the channels to dispatch.
  void forget(Channel& channel);
  void on_timer(std::error_code ec);
  // Deliveries happen once the commands at hand are answered, as nsqd's message pumps hand
  // messages on after the command that made room for them returned: a PUB's OK comes before the
  // message it lets a subscriber have. One pass over the channels marked, however many calls.
  void dispatch_soon(Channel& channel);
  void post_dispatch();
  Message make_message(std::string body);
  // What a topic holds goes to its channels, a copy each, unless it has none or is paused.
  void distribute_pending(Topic& topic);
  void put(Channel& channel, const Message& message, std::chrono::milliseconds defer,
           Clock::time_point now);

  asio::io_context& io_;
  ClockTimer timer_;  // the real clock, or NsqdOptions::clock
  std::optional<Clock::time_point> armed_;
  bool dispatch_posted_ = false;
  std::set<Channel*> to_dispatch_;
  std::set<std::pair<Clock::time_point, Channel*>> deadlines_;
  std::unordered_map<const Channel*, Clock::time_point> deadline_of_;
  BrokerListener& listener_;
  std::shared_ptr<MemoryAccount> account_;
  DiskFolder disk_;
  QueueRoom room_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, std::unique_ptr<Topic>> topics_;
};

}  // namespace polybus::nsq::testing::detail
