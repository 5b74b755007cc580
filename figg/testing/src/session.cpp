// SPDX-License-Identifier: Apache-2.0
#include "session.hpp"

namespace polybus::figg::testing {

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
      std::string header;
      append_data_header(header, name, entry.next(), entry.data->size());
      send(std::move(header), entry.data);
      ++attachment.next_number;
      ++topic.delivered;
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
