// SPDX-License-Identifier: Apache-2.0
#include "machine.hpp"

#include <algorithm>

#include "polybus/error.hpp"

namespace polybus::figg {

Machine::Machine(std::size_t window, std::size_t max_payload, MachineHandler& handler)
    : handler_(handler), parser_(max_payload), ring_(std::max<std::size_t>(1, window)) {}

void Machine::publish(TopicName topic, std::string&& data) {
  Slot& slot = ring_[ring_index(unacked_)];
  slot.seq = next_seq_++;
  slot.topic = std::move(topic);
  slot.data.assign(std::move(data), payload_blocks_);
  ++unacked_;
  send_unsent();
}

void Machine::send_unsent() {
  while (connected_ && written_ < unacked_ && handler_.write_room()) {
    send_publish(ring_[ring_index(written_)]);
    ++written_;
  }
}

void Machine::send_publish(const Slot& slot) {
  // Built in a buffer the machine keeps and copied by the handler into its write queue: no
  // allocation per publish once both have grown to a frame's size. A small payload joins its
  // header there, so that the frame is one copy into the write queue, not two.
  frame_scratch_.clear();
  highest_sent_ = std::max(highest_sent_, slot.seq);
  append_publish_header(frame_scratch_, slot.topic, slot.seq, slot.data.size());
  if (slot.data.shared()) {
    handler_.send_copy(frame_scratch_);
    handler_.send(slot.data.shared());  // kept in the ring for resending, not copied
    return;
  }
  frame_scratch_.append(slot.data.view());
  handler_.send_copy(frame_scratch_);
}

void Machine::acked(std::uint64_t seq) {
  // An ACK releases that message and every earlier one.
  std::size_t released = 0;
  while (unacked_ > 0 && ring_[head_].seq <= seq) {
    ring_[head_] = Slot{};
    head_ = ring_index(1);
    --unacked_;
    ++released;
  }
  written_ -= std::min(written_, released);
  if (released > 0) handler_.on_acked(released);
}

void Machine::abandon() {
  written_ = 0;
  while (unacked_ > 0) {
    ring_[head_] = Slot{};
    head_ = ring_index(1);
    --unacked_;
  }
}

std::error_code Machine::attach(const std::string& topic, std::optional<std::uint64_t> from) {
  auto it = attachments_.find(topic);
  if (it != attachments_.end() && it->second.state != State::detaching)
    return make_error_code(polybus::errc::already_subscribed);
  Attachment a{State::attaching, from, false};
  attachments_[topic] = a;
  if (connected_) send_attach(topic, a);
  return {};
}

void Machine::send_attach(const std::string& topic, const Attachment& a) {
  std::string bytes;
  append_attach(bytes, topic, a.offset.has_value(), a.offset.value_or(0));
  handler_.send(std::move(bytes));
}

void Machine::detach(const std::string& topic) {
  auto it = attachments_.find(topic);
  if (it == attachments_.end() || it->second.state == State::detaching) return;
  it->second.state = State::detaching;
  if (connected_) {
    std::string bytes;
    append_detach(bytes, topic);
    handler_.send(std::move(bytes));
  }
}

std::optional<std::uint64_t> Machine::offset(const std::string& topic) const {
  auto it = attachments_.find(topic);
  return it == attachments_.end() ? std::nullopt : it->second.offset;
}

bool Machine::deliverable(const Attachment& a, std::uint64_t offset) {
  if (!a.catch_up_to) return true;
  const std::uint64_t delivered_to = a.offset.value_or(0);
  if (offset <= delivered_to) return false;  // the other attachment's copy, already delivered
  // The live attachment runs ahead of the replay: its messages come again, in order, by replay.
  return !(delivered_to < *a.catch_up_to && offset > *a.catch_up_to);
}

void Machine::ping(std::uint64_t timestamp) {
  if (!connected_) return;
  std::string bytes;
  append_ping(bytes, timestamp);
  handler_.send(std::move(bytes));
}

void Machine::connected() {
  connected_ = true;
  parser_.reset();
  // The document's order: pending ATTACHes, attached topics from their offsets, pending
  // DETACHes, then every unacknowledged PUBLISH in sequence order with its original number.
  for (auto& [topic, a] : attachments_)
    if (a.state == State::attaching) send_attach(topic, a);
  // An attached topic first learns where the log ends now: a server that restarted starts every
  // log again at 0 and would deliver nothing from an offset beyond its end.
  for (auto& [topic, a] : attachments_)
    if (a.state == State::attached || a.state == State::probing || a.state == State::catching_up) {
      a.catch_up_to.reset();
      if (!a.offset) {
        a.state = State::attaching;
        send_attach(topic, a);
        continue;
      }
      a.state = State::probing;
      std::string bytes;
      append_attach(bytes, topic, false, 0);
      handler_.send(std::move(bytes));
    }
  for (auto it = attachments_.begin(); it != attachments_.end();) {
    if (it->second.state == State::detaching) {
      std::string bytes;
      append_detach(bytes, it->first);
      handler_.send(std::move(bytes));
      // A fresh connection never had this attachment: nothing more to wait for.
      it = erase_attachment(it);
    } else {
      ++it;
    }
  }
  // This connection has sent nothing yet: an ACK may confirm only what it resends.
  highest_sent_ = unacked_ > 0 ? ring_[head_].seq - 1 : next_seq_ - 1;
  written_ = 0;
  send_unsent();
}

void Machine::disconnected() {
  connected_ = false;
  written_ = 0;
  parser_.reset();  // the next connection gets the resend
}

void Machine::receive(const std::shared_ptr<const void>& owner, std::string_view bytes) {
  while (!bytes.empty() && connected_) {
    Frame frame;
    auto result = parser_.feed(bytes, frame);
    // Tested for an error first: comparing with errc::frame_too_large makes an error_code, a call
    // to the category, on every frame.
    if (result.error)
      return handler_.on_failure(
          result.error,
          result.error == errc::frame_too_large
              ? "a frame from the Figg server declares a payload of " +
                    std::to_string(parser_.declared_size()) +
                    " bytes: exceeds max_frame_size=" + std::to_string(parser_.max_payload())
              : "bad frame from the Figg server: " + result.error.message());
    bytes.remove_prefix(result.consumed);
    if (!result.has_frame) continue;
    ++frames_;
    handle(frame, frame.in_parser_buffer ? nullptr : owner);
  }
}

void Machine::handle(const Frame& frame, const std::shared_ptr<const void>& owner) {
  std::error_code ec;
  switch (frame.type) {
    case MessageType::ack: {
      std::uint64_t seq = 0;
      if ((ec = parse_u64(frame.payload, seq))) break;
      // An ACK for a number never sent would confirm publishes the server never saw.
      if (seq > highest_sent_)
        return handler_.on_failure(make_error_code(polybus::errc::protocol_error),
                                   "the Figg server acknowledged sequence number " +
                                       std::to_string(seq) + ", but the last PUBLISH sent was " +
                                       std::to_string(highest_sent_));
      acked(seq);
      break;
    }
    case MessageType::data: {
      Data data;
      if ((ec = parse_data(frame.payload, data))) break;
      // Runs of DATA are for one topic: the last one's attachment is looked at first.
      auto it = last_data_ != attachments_.end() && last_data_->first == data.topic
                    ? last_data_
                    : attachments_.find(data.topic);
      last_data_ = it;
      // DATA for a topic no longer wanted (the real server ignores DETACH) is dropped.
      if (it == attachments_.end() || it->second.state == State::detaching) return;
      if (!deliverable(it->second, data.offset)) return;
      it->second.offset = data.offset;
      it->second.received = true;
      if (owner) return handler_.on_data(it->first, data.offset, data.data, owner);
      // A frame that straddled two reads is in the parser's buffer, which the next overwrites.
      std::shared_ptr<const void> keep;
      const std::string_view view = kept_.keep(data.data, keep);
      handler_.on_data(it->first, data.offset, view, keep);
      return;
    }
    case MessageType::attached: {
      TopicOffset attached;
      if ((ec = parse_attached(frame.payload, attached))) break;
      auto it = attachments_.find(attached.topic);
      if (it == attachments_.end()) return;
      Attachment& a = it->second;
      if (a.state == State::probing) {
        const std::uint64_t end = attached.offset, resume_from = a.offset.value_or(0);
        if (end == resume_from) {
          a.state = State::attached;  // nothing was published meanwhile
          return;
        }
        // Missed messages: replay them on a second attachment, from where this client was, or
        // from the start of a log that a restart emptied.
        const std::uint64_t from = end > resume_from ? resume_from : 0;
        if (end < resume_from) handler_.on_log_reset(it->first, resume_from, end);
        a.state = State::catching_up;
        a.catch_up_to = end;
        a.offset = from;
        std::string bytes;
        append_attach(bytes, it->first, true, from);
        handler_.send(std::move(bytes));
        return;
      }
      if (a.state == State::catching_up) {
        a.state = State::attached;
        return;
      }
      if (a.state != State::attaching) return;
      it->second.state = State::attached;
      // With no message received yet, resume from where the server started the attachment
      // (it moves an expired offset to the oldest message it still has).
      if (!it->second.received) it->second.offset = attached.offset;
      handler_.on_attached(it->first, attached.offset);
      return;
    }
    case MessageType::detached: {
      std::string_view topic;
      if ((ec = parse_topic(frame.payload, topic))) break;
      auto it = attachments_.find(topic);
      if (it != attachments_.end() && it->second.state == State::detaching) erase_attachment(it);
      return;
    }
    case MessageType::pong: {
      std::uint64_t timestamp = 0;
      if (!(ec = parse_u64(frame.payload, timestamp))) handler_.on_pong(timestamp);
      break;
    }
    default:
      return;  // as the real server does with unknown types: ignore them
  }
  if (ec)
    handler_.on_failure(ec, "malformed Figg message of type " +
                                std::to_string(static_cast<int>(frame.type)) + ": " + ec.message());
}

}  // namespace polybus::figg
