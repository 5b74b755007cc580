// SPDX-License-Identifier: Apache-2.0
#include "session.hpp"

#include <asio/post.hpp>

namespace polybus::figg::testing {
namespace {

std::string_view type_name(MessageType type) {
  switch (type) {
    case MessageType::attach:
      return "ATTACH";
    case MessageType::detach:
      return "DETACH";
    case MessageType::publish:
      return "PUBLISH";
    case MessageType::ping:
      return "PING";
    default:
      return {};  // ignored, as the real server ignores it
  }
}

}  // namespace

void Session::journal(bool received, std::string_view kind, std::string_view topic,
                      std::optional<std::uint64_t> id, std::size_t bytes) {
  polybus::testing::Journal& journal = broker_.journal_;
  if (!journal.enabled()) return;
  polybus::testing::JournalEntry entry;
  entry.connection = id_;
  entry.received = received;
  entry.kind = kind;
  entry.topic = topic;
  if (id) entry.id = std::to_string(*id);
  entry.bytes = bytes;
  journal.record(std::move(entry));
}

std::optional<polybus::testing::FaultRule> Session::fault_for(std::string_view unit,
                                                              std::string_view topic) {
  if (broker_.faults_.empty()) return std::nullopt;
  auto fault = broker_.faults_.fire({unit, topic, {}, id_});
  using Action = polybus::testing::FaultRule::Action;
  if (fault && fault->action == Action::delay) hold_output(fault->delay);
  if (fault && fault->action == Action::hold) {
    hold_output(std::chrono::hours(24 * 365));  // until the rule is removed
    broker_.faults_.when_removed(fault->id, id_,
                                 [weak = weak_from_this(), executor = hold_timer_.get_executor()] {
                                   asio::post(executor, [weak] {
                                     if (const auto self = weak.lock())
                                       self->hold_output(std::chrono::milliseconds(0));
                                   });
                                 });
  }
  return fault;
}

void Session::hold_output(std::chrono::milliseconds delay) {
  held_ = true;
  hold_timer_.expires_after(delay);
  hold_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec) return;  // cancelled, or a later delay took over
    self->held_ = false;
    self->write();
  });
}

bool Session::handle_with_faults(const Frame& frame) {
  using Action = polybus::testing::FaultRule::Action;
  // Without a journal or rules, nothing to look at: the frame is parsed once, by handle().
  if (!broker_.journal_.enabled() && broker_.faults_.empty()) return handle(frame);
  const std::string_view unit = type_name(frame.type);
  if (unit.empty()) return handle(frame);
  std::string_view topic;
  std::optional<std::uint64_t> id;
  std::size_t bytes = 0;
  if (frame.type == MessageType::attach) {
    Attach attach;
    if (!parse_attach(frame.payload, attach)) {
      topic = attach.topic;
      if (attach.from_offset) id = attach.offset;
    }
  } else if (frame.type == MessageType::detach) {
    if (parse_topic(frame.payload, topic)) topic = {};
  } else if (frame.type == MessageType::publish) {
    Publish publish;
    if (!parse_publish(frame.payload, publish)) {
      topic = publish.topic;
      id = publish.seq;
      bytes = publish.data.size();
    }
  }
  journal(true, unit, topic, id, bytes);
  const auto fault = fault_for(unit, topic);
  if (!fault) return handle(frame);
  switch (fault->action) {
    case Action::reset:
      stream_.reset();
      return false;
    case Action::error:  // Figg has no error message: the connection ends
    case Action::close:
      return false;
    case Action::swallow:
      return true;
    case Action::duplicate:
      if (!handle(frame)) return false;
      return handle(frame);
    case Action::delay:
    case Action::hold:
      break;
  }
  return handle(frame);
}

bool Session::handle(const Frame& frame) {
  switch (frame.type) {
    case MessageType::attach: {
      Attach attach;
      if (parse_attach(frame.payload, attach)) return false;
      std::string name(attach.topic);
      Topic& topic = broker_.topic(name);
      std::uint64_t number = topic.end_number();
      std::uint64_t offset = topic.end;
      if (attach.from_offset) {
        if (attach.offset <= topic.first_offset()) {
          // An expired (or the very first) offset starts from the oldest message kept.
          number = topic.first_number;
          offset = std::max(attach.offset, topic.first_offset());
          if (attach.offset < topic.first_offset()) offset = topic.first_offset();
        } else if (attach.offset >= topic.end) {
          const bool beyond = attach.offset > topic.end;
          number =
              beyond && broker_.options_.real_server_quirks ? kNeverDelivers : topic.end_number();
          offset = attach.offset;
        } else {
          auto it = std::lower_bound(topic.log.begin(), topic.log.end(), attach.offset,
                                     [](const Entry& e, std::uint64_t x) { return e.start < x; });
          number = topic.first_number + static_cast<std::uint64_t>(it - topic.log.begin());
          offset = attach.offset;
        }
      }
      if (!broker_.options_.real_server_quirks) attachments_.erase(name);
      attachments_.emplace(name, Attachment{number});
      std::string out;
      append_attached(out, name, offset);
      journal(false, "ATTACHED", name, offset, 0);
      send(std::move(out));
      pump(name);
      return true;
    }
    case MessageType::detach: {
      std::string_view name;
      if (parse_topic(frame.payload, name)) return false;
      if (broker_.options_.real_server_quirks) return true;  // ignored, DATA keeps coming
      attachments_.erase(std::string(name));
      std::string out;
      append_detached(out, name);
      journal(false, "DETACHED", name, std::nullopt, 0);
      send(std::move(out));
      return true;
    }
    case MessageType::publish: {
      Publish publish;
      if (parse_publish(frame.payload, publish)) return false;
      std::string name(publish.topic);
      Topic& topic = broker_.topic(name);
      Entry entry{topic.end, std::make_shared<const std::string>(publish.data)};
      topic.end = entry.next();
      topic.bytes += 4 + entry.data->size();
      topic.log.push_back(std::move(entry));
      auto retention = broker_.options_.retention_bytes;
      while (retention > 0 && topic.bytes > retention && topic.log.size() > 1) {
        topic.bytes -= 4 + topic.log.front().data->size();
        topic.log.pop_front();
        ++topic.first_number;
      }
      std::string out;
      append_ack(out, publish.seq);
      journal(false, "ACK", name, publish.seq, 0);
      send(std::move(out));
      broker_.published(name);
      return true;
    }
    case MessageType::ping: {
      std::uint64_t timestamp = 0;
      if (parse_u64(frame.payload, timestamp)) return false;
      if (broker_.options_.real_server_quirks) return true;  // the older server has no PONG
      if (!broker_.answer_pings_) return true;
      {
        std::lock_guard<std::mutex> lock(broker_.pongs_mutex_);
        ++broker_.pongs_;
        broker_.pongs_changed_.notify_all();
      }
      std::string out;
      append_pong(out, timestamp);
      journal(false, "PONG", {}, std::nullopt, 0);
      send(std::move(out));
      return true;
    }
    default:
      return true;  // unknown types are ignored, as the real server does
  }
}

constexpr std::size_t kHighWater = 256 * 1024;

void Session::pump(const std::string& name) {
  auto [first, last] = attachments_.equal_range(name);
  if (first == last) return;
  Topic& topic = broker_.topic(name);
  for (auto it = first; it != last; ++it) {
    Attachment& attachment = it->second;
    if (attachment.next_number < topic.first_number) attachment.next_number = topic.first_number;
    while (queued_ < kHighWater && attachment.next_number < topic.end_number()) {
      const Entry& entry = topic.log[attachment.next_number - topic.first_number];
      ++attachment.next_number;
      ++topic.delivered;
      using Action = polybus::testing::FaultRule::Action;
      const auto fault = fault_for("DATA", name);
      if (fault && fault->action == Action::swallow) continue;  // lost on the way
      if (fault && fault->action != Action::delay && fault->action != Action::hold &&
          fault->action != Action::duplicate) {
        // Ends the connection, but not here: the broker may be walking its sessions.
        if (fault->action == Action::reset) stream_.reset();
        asio::post(broker_.io_.context(), [self = shared_from_this()] { self->finish(); });
        return;
      }
      std::string header;
      append_data_header(header, name, entry.next(), entry.data->size());
      journal(false, "DATA", name, entry.next(), entry.data->size());
      if (fault && fault->action == Action::duplicate) send(header, entry.data);
      send(std::move(header), entry.data);
    }
    if (attachment.next_number < topic.end_number()) mark_stalled(name);
  }
}

void Session::pump_stalled() {
  // Each topic stalled now gets one turn at most: one still behind goes to the back again.
  for (std::size_t turns = stalled_.size(); turns > 0 && queued_ < kHighWater; --turns) {
    const std::string name = std::move(stalled_.front());
    stalled_.pop_front();
    stalled_names_.erase(name);
    pump(name);  // detached meanwhile: nothing to send, and it is forgotten
  }
}

}  // namespace polybus::figg::testing
