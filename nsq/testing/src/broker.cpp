// SPDX-License-Identifier: Apache-2.0
#include "broker.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <numeric>

#include "polybus/nsq/codec.hpp"

namespace polybus::nsq::testing::detail {
namespace {

constexpr std::string_view kEphemeralSuffix = "#ephemeral";

bool has_ephemeral_suffix(std::string_view name) {
  return name.size() >= kEphemeralSuffix.size() &&
         name.substr(name.size() - kEphemeralSuffix.size()) == kEphemeralSuffix;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Messages

MessageId MessageId::from_counter(std::uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  MessageId id;
  for (int i = 15; i >= 0; --i) {
    id.text[static_cast<std::size_t>(i)] = kHex[value & 0xf];
    value >>= 4;
  }
  return id;
}

MessageId MessageId::from_wire(std::string_view sixteen_bytes) {
  MessageId id;
  std::copy_n(sixteen_bytes.data(), std::min(sixteen_bytes.size(), id.text.size()),
              id.text.begin());
  return id;
}

StoredBody::StoredBody(std::string bytes, std::shared_ptr<MemoryAccount> account)
    : bytes_(std::move(bytes)), account_(std::move(account)) {
  account_->used += bytes_.size();
}

StoredBody::~StoredBody() {
  account_->used -= bytes_.size();
}

// ---------------------------------------------------------------------------------------------
// WaitingMessages

void WaitingMessages::put(Message message) {
  if (!disk_ && static_cast<std::int64_t>(memory_.size()) < room_.mem_queue_size &&
      !room_.memory_full())
    return memory_.push_back(std::move(message));
  if (!disk_) disk_ = std::make_unique<DiskQueue>(*room_.disk, backend_name_);
  if (!disk_->push(message)) memory_.push_back(std::move(message));
}

std::optional<Message> WaitingMessages::take() {
  if (!memory_.empty()) {
    Message message = std::move(memory_.front());
    memory_.pop_front();
    return message;
  }
  if (!disk_) return std::nullopt;
  std::optional<Message> message = disk_->pop(room_.memory);
  if (disk_->empty()) disk_.reset();  // its files are gone: memory first again
  return message;
}

void WaitingMessages::clear() {
  memory_.clear();
  disk_.reset();
}

// ---------------------------------------------------------------------------------------------
// Channel

Channel::Channel(std::string name, std::string backend_name, QueueRoom& room)
    : name_(std::move(name)),
      room_(room),
      ephemeral_(has_ephemeral_suffix(name_)),
      ready_(room, std::move(backend_name)) {}

void Channel::put(Message message) {
  ++message_count_;
  if (!ephemeral_) return ready_.put(std::move(message));
  // An unbuffered one (mem_queue_size 0) hands messages straight on: kept here until then.
  if (static_cast<std::int64_t>(ready_.in_memory()) < room_.mem_queue_size ||
      room_.mem_queue_size <= 0)
    ready_.put_in_memory(std::move(message));
}

void Channel::put_deferred(Message message, Clock::time_point due) {
  ++message_count_;
  deferred_.emplace(due, std::move(message));
}

void Channel::empty() {
  ready_.clear();
  deferred_.clear();
  in_flight_.clear();
  in_flight_deadlines_.clear();
  for (Subscriber* subscriber : subscribers_) subscriber->channel_emptied();
}

void Channel::add_subscriber(Subscriber* subscriber) {
  if (std::find(subscribers_.begin(), subscribers_.end(), subscriber) == subscribers_.end()) {
    subscribers_.push_back(subscriber);
  }
}

void Channel::remove_subscriber(Subscriber* subscriber) {
  subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), subscriber),
                     subscribers_.end());
  if (next_subscriber_ >= subscribers_.size()) next_subscriber_ = 0;
}

Subscriber* Channel::next_ready_subscriber() {
  const std::size_t count = subscribers_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t index = (next_subscriber_ + i) % count;
    if (subscribers_[index]->ready_for_message()) {
      next_subscriber_ = (index + 1) % count;
      return subscribers_[index];
    }
  }
  return nullptr;
}

void Channel::dispatch(Clock::time_point now) {
  if (paused_) return;
  while (!ready_.empty()) {
    Subscriber* subscriber = next_ready_subscriber();
    if (subscriber == nullptr) return;
    std::optional<Message> taken = ready_.take();
    if (!taken) return;  // the disk queue failed, and said so
    Message message = std::move(*taken);
    if (subscriber->sampled_out()) continue;
    ++message.attempts;
    ++delivered_count_;
    if (message.attempts > 1) ++redelivered_count_;
    const Clock::time_point deadline = now + subscriber->message_timeout();
    subscriber->deliver(message);
    const MessageId id = message.id;
    in_flight_deadlines_.emplace(deadline, id);
    in_flight_[id] = InFlight{std::move(message), subscriber->client_id(), deadline, now};
  }
}

std::unordered_map<MessageId, Channel::InFlight, MessageIdHash>::iterator Channel::find_owned(
    std::uint64_t client_id, const MessageId& id, std::string& error) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) {
    error = "ID not in flight";
  } else if (it->second.client_id != client_id) {
    error = "client does not own message";
    it = in_flight_.end();
  }
  return it;
}

void Channel::forget_deadline(const InFlight& entry, const MessageId& id) {
  in_flight_deadlines_.erase({entry.deadline, id});
}

std::string Channel::finish(std::uint64_t client_id, const MessageId& id) {
  std::string error;
  auto it = find_owned(client_id, id, error);
  if (it == in_flight_.end()) return error;
  forget_deadline(it->second, id);
  in_flight_.erase(it);
  ++finish_count_;
  return {};
}

std::string Channel::requeue(std::uint64_t client_id, const MessageId& id,
                             std::chrono::milliseconds delay, Clock::time_point now) {
  std::string error;
  auto it = find_owned(client_id, id, error);
  if (it == in_flight_.end()) return error;
  forget_deadline(it->second, id);
  Message message = std::move(it->second.message);
  in_flight_.erase(it);
  ++requeue_count_;
  requeue_delays_.push_back(delay);
  if (requeue_delays_.size() > kKeptHistory) requeue_delays_.pop_front();
  if (delay.count() == 0) {
    ready_.put_in_memory(std::move(message));
  } else {
    deferred_.emplace(now + delay, std::move(message));  // not a new message: not counted
  }
  return {};
}

std::string Channel::touch(std::uint64_t client_id, const MessageId& id,
                           std::chrono::milliseconds timeout,
                           std::chrono::milliseconds max_msg_timeout, Clock::time_point now) {
  std::string error;
  auto it = find_owned(client_id, id, error);
  if (it == in_flight_.end()) return error;
  InFlight& entry = it->second;
  forget_deadline(entry, id);
  entry.deadline = std::min(now + timeout, entry.delivered + max_msg_timeout);
  in_flight_deadlines_.emplace(entry.deadline, id);
  return {};
}

void Channel::process_due(Clock::time_point now) {
  while (!in_flight_deadlines_.empty() && in_flight_deadlines_.begin()->first <= now) {
    const MessageId id = in_flight_deadlines_.begin()->second;
    in_flight_deadlines_.erase(in_flight_deadlines_.begin());
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;
    for (Subscriber* subscriber : subscribers_) {
      if (subscriber->client_id() == it->second.client_id) subscriber->message_timed_out();
    }
    ++timeout_count_;
    ready_.put_in_memory(std::move(it->second.message));
    in_flight_.erase(it);
  }
  while (!deferred_.empty() && deferred_.begin()->first <= now) {
    ready_.put_in_memory(std::move(deferred_.begin()->second));
    deferred_.erase(deferred_.begin());
  }
}

std::optional<Clock::time_point> Channel::next_deadline() const {
  std::optional<Clock::time_point> next;
  if (!in_flight_deadlines_.empty()) next = in_flight_deadlines_.begin()->first;
  if (!deferred_.empty() && (!next || deferred_.begin()->first < *next)) {
    next = deferred_.begin()->first;
  }
  return next;
}

void Channel::return_in_flight() {
  // In delivery order, after what was already waiting, as nsqd's flush writes them.
  std::vector<InFlight*> entries;
  for (auto& [id, entry] : in_flight_) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const InFlight* a, const InFlight* b) { return a->delivered < b->delivered; });
  for (InFlight* entry : entries) ready_.put_in_memory(std::move(entry->message));
  in_flight_.clear();
  in_flight_deadlines_.clear();
}

// ---------------------------------------------------------------------------------------------
// Topic

Topic::Topic(std::string name, QueueRoom& room)
    : name_(std::move(name)), ephemeral_(has_ephemeral_suffix(name_)), pending_(room, name_) {}

void Topic::put_pending(Message message) {
  // A deferred one keeps its delay in memory; nsqd's disk queue would lose it.
  if (message.defer.count() > 0 || ephemeral_) return pending_.put_in_memory(std::move(message));
  pending_.put(std::move(message));
}

Channel* Topic::find_channel(const std::string& name) const {
  auto it = channels_.find(name);
  return it == channels_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------------------------------------
// Broker

Broker::Broker(asio::io_context& io, const NsqdOptions& options, BrokerListener& listener)
    : io_(io),
      timer_(io, options.clock),
      listener_(listener),
      account_(std::make_shared<MemoryAccount>()),
      disk_(options.data_path, options.max_disk_bytes, options.max_bytes_per_file, options.log) {
  account_->limit = options.max_stored_bytes;
  room_.mem_queue_size = options.mem_queue_size;
  room_.memory = account_;
  room_.disk = &disk_;
}

Broker::~Broker() = default;

Topic& Broker::topic(const std::string& name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) return *it->second;
  Topic& created = *topics_.emplace(name, std::make_unique<Topic>(name, room_)).first->second;
  listener_.topic_created(name);
  return created;
}

Channel& Broker::channel(Topic& topic, const std::string& name) {
  if (Channel* existing = topic.find_channel(name)) return *existing;
  Channel& created =
      *topic.channels()
           .emplace(name, std::make_unique<Channel>(name, topic.name() + ":" + name, room_))
           .first->second;
  // The topic's messages go to the channels it has when they are pumped: all to the first.
  distribute_pending(topic);
  listener_.channel_created(topic.name(), name);
  return created;
}

const Topic* Broker::find_topic(const std::string& name) const {
  auto it = topics_.find(name);
  return it == topics_.end() ? nullptr : it->second.get();
}

const Channel* Broker::find_channel(const std::string& topic, const std::string& channel) const {
  const Topic* found = find_topic(topic);
  return found == nullptr ? nullptr : found->find_channel(channel);
}

Message Broker::make_message(std::string body) {
  Message message;
  message.id = MessageId::from_counter(next_id_++);
  message.body = std::make_shared<const StoredBody>(std::move(body), account_);
  message.timestamp_ns = now_ns();
  return message;
}

void Broker::put(Channel& channel, const Message& message, std::chrono::milliseconds defer,
                 Clock::time_point now) {
  if (defer.count() > 0) {
    Message copy = message;
    copy.defer = std::chrono::milliseconds(0);
    channel.put_deferred(std::move(copy), now + defer);
  } else {
    channel.put(message);
  }
}

void Broker::distribute_pending(Topic& topic) {
  if (topic.paused || topic.starting || topic.channels().empty() || !topic.has_pending()) {
    return;
  }
  const Clock::time_point now = this->now();
  while (std::optional<Message> message = topic.take_pending()) {
    for (auto& [name, channel] : topic.channels()) put(*channel, *message, message->defer, now);
  }
  for (auto& [name, channel] : topic.channels()) {
    track_deadline(*channel);
    dispatch_soon(*channel);
  }
  arm_timer();
}

void Broker::start_topic(const std::string& name, const std::vector<std::string>& channels) {
  Topic* found = find_topic(name);
  if (found == nullptr || !found->starting) return;
  for (const std::string& channel_name : channels) {
    if (has_ephemeral_suffix(channel_name) || !valid_channel_name(channel_name)) continue;
    channel(*found, channel_name);  // held back: the topic is still starting
  }
  found->starting = false;
  distribute_pending(*found);
}

void Broker::set_topic_paused(Topic& topic, bool paused) {
  topic.paused = paused;
  distribute_pending(topic);
}

void Broker::set_channel_paused(Channel& channel, bool paused) {
  channel.set_paused(paused);
  if (!paused) dispatch_soon(channel);
}

void Broker::empty_topic(Topic& topic) {
  topic.clear_pending();
}

void Broker::empty_channel(Channel& channel) {
  channel.empty();
  reschedule(channel);
  dispatch_soon(channel);  // the clients' in-flight room is back
}

bool Broker::delete_channel(Topic& topic, const std::string& name) {
  Channel* channel = topic.find_channel(name);
  if (channel == nullptr) return false;
  // Each client forgets the channel before it closes, so none unsubscribes from it on the way.
  const std::vector<Subscriber*> subscribers = channel->subscribers();
  for (Subscriber* subscriber : subscribers) subscriber->channel_deleted();
  const std::string topic_name = topic.name();
  forget(*channel);
  topic.channels().erase(name);
  listener_.channel_deleted(topic_name, name);
  arm_timer();
  return true;
}

bool Broker::delete_topic(const std::string& name) {
  Topic* topic = find_topic(name);
  if (topic == nullptr) return false;
  std::vector<std::string> channels;
  for (const auto& [channel_name, channel] : topic->channels()) channels.push_back(channel_name);
  for (const std::string& channel : channels) delete_channel(*topic, channel);
  topics_.erase(name);
  listener_.topic_deleted(name);
  return true;
}

bool Broker::publish(const std::string& topic_name, std::vector<std::string> bodies,
                     std::chrono::milliseconds defer) {
  const std::size_t bytes =
      std::accumulate(bodies.begin(), bodies.end(), std::size_t{0},
                      [](std::size_t sum, const std::string& body) { return sum + body.size(); });
  if (account_->used + bytes > account_->limit) {
    // What memory cannot take goes to disk, a record for each channel's copy.
    const Topic* existing = find_topic(topic_name);
    const std::uint64_t copies =
        existing == nullptr ? 1 : std::max<std::size_t>(1, existing->channels().size());
    std::uint64_t records = 0;
    for (const std::string& body : bodies) records += disk_record_bytes(body.size());
    const DiskAccount& disk = disk_.account();
    if (disk.used + records * copies > disk.limit) return false;
  }
  Topic& target = topic(topic_name);
  const Clock::time_point now = this->now();
  for (std::string& body : bodies) {
    target.message_bytes += body.size();
    Message message = make_message(std::move(body));
    ++target.message_count;
    if (target.channels().empty() || target.paused || target.starting) {
      message.defer = defer;
      target.put_pending(std::move(message));
      continue;
    }
    for (auto& [name, channel] : target.channels()) put(*channel, message, defer, now);
  }
  for (auto& [name, channel] : target.channels()) {
    if (defer.count() > 0) track_deadline(*channel);
    dispatch_soon(*channel);
  }
  arm_timer();
  return true;
}

void Broker::subscribe(Channel& channel, Subscriber& subscriber) {
  channel.add_subscriber(&subscriber);
}

void Broker::unsubscribe(Topic& topic, Channel& channel, Subscriber& subscriber) {
  channel.remove_subscriber(&subscriber);
  if (!channel.ephemeral() || channel.subscriber_count() > 0) {
    reschedule(channel);  // what the subscriber had in flight went back
    return;
  }
  const std::string topic_name = topic.name();
  const std::string channel_name = channel.name();
  forget(channel);
  topic.channels().erase(channel_name);  // `channel` is gone from here on
  listener_.channel_deleted(topic_name, channel_name);
  if (topic.ephemeral() && topic.channels().empty()) {
    topics_.erase(topic_name);
    listener_.topic_deleted(topic_name);
  }
  arm_timer();
}

void Broker::changed(Channel& channel) {
  reschedule(channel);
  dispatch_soon(channel);
}

void Broker::dispatch_soon(Channel& channel) {
  to_dispatch_.insert(&channel);
  post_dispatch();
}

void Broker::post_dispatch() {
  if (dispatch_posted_) return;
  dispatch_posted_ = true;
  asio::post(io_, [this] {
    dispatch_posted_ = false;
    const Clock::time_point now = this->now();
    for (Channel* channel : std::exchange(to_dispatch_, {})) {
      channel->dispatch(now);
      track_deadline(*channel);
    }
    arm_timer();
    listener_.state_changed();
  });
}

void Broker::return_in_flight() {
  for (auto& [topic_name, topic] : topics_) {
    for (auto& [channel_name, channel] : topic->channels()) channel->return_in_flight();
  }
  reschedule_all();
}

void Broker::close() {
  timer_.cancel();
  armed_.reset();
}

void Broker::track_deadline(Channel& channel) {
  if (auto it = deadline_of_.find(&channel); it != deadline_of_.end()) {
    deadlines_.erase({it->second, &channel});
    deadline_of_.erase(it);
  }
  if (const auto deadline = channel.next_deadline()) {
    deadlines_.insert({*deadline, &channel});
    deadline_of_[&channel] = *deadline;
  }
}

void Broker::forget(Channel& channel) {
  if (auto it = deadline_of_.find(&channel); it != deadline_of_.end()) {
    deadlines_.erase({it->second, &channel});
    deadline_of_.erase(it);
  }
  to_dispatch_.erase(&channel);
}

void Broker::reschedule(Channel& channel) {
  track_deadline(channel);
  arm_timer();
}

void Broker::reschedule_all() {
  for (auto& [topic_name, topic] : topics_)
    for (auto& [channel_name, channel] : topic->channels()) track_deadline(*channel);
  arm_timer();
}

void Broker::arm_timer() {
  std::optional<Clock::time_point> next;
  if (!deadlines_.empty()) next = deadlines_.begin()->first;
  if (next == armed_) return;
  armed_ = next;
  if (!next) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(*next);
  timer_.async_wait([this](std::error_code ec) { on_timer(ec); });
}

void Broker::on_timer(std::error_code ec) {
  if (ec == asio::error::operation_aborted) return;
  armed_.reset();
  const Clock::time_point now = this->now();
  // Only the channels whose deadline came: the others have nothing due.
  std::vector<Channel*> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it)
    due.push_back(it->second);
  for (Channel* channel : due) {
    channel->process_due(now);
    channel->dispatch(now);
    track_deadline(*channel);
  }
  arm_timer();
  listener_.state_changed();
}

}  // namespace polybus::nsq::testing::detail
