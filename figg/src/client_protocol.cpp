#include "client_protocol.hpp"

#include <algorithm>

#include "polybus/error.hpp"

namespace polybus::figg {

ClientProtocol::ClientProtocol(std::size_t window, std::size_t max_payload, ProtocolHandler& handler)
    : handler_(handler), parser_(max_payload), ring_(std::max<std::size_t>(1, window)) {}

void ClientProtocol::publish(std::string topic, std::shared_ptr<const std::string> data,
                             OpCompletion done) {
  Slot& slot = ring_[(head_ + unacked_) % ring_.size()];
  slot = Slot{next_seq_++, std::move(topic), std::move(data), std::move(done)};
  ++unacked_;
  if (connected_) send_publish(slot);
}

void ClientProtocol::send_publish(const Slot& slot) {
  OutPiece header;
  highest_sent_ = std::max(highest_sent_, slot.seq);
  append_publish_header(header.bytes, slot.topic, slot.seq, slot.data->size());
  output_.push_back(std::move(header));
  output_.push_back(OutPiece{{}, slot.data});  // shared: kept in the ring for resending
}

void ClientProtocol::acked(std::uint64_t seq) {
  // An ACK releases that message and every earlier one.
  while (unacked_ > 0 && ring_[head_].seq <= seq) {
    Slot slot = std::move(ring_[head_]);
    ring_[head_] = Slot{};
    head_ = (head_ + 1) % ring_.size();
    --unacked_;
    slot.done({});
  }
}

void ClientProtocol::fail_all(std::error_code ec, const std::string& detail) {
  while (unacked_ > 0) {
    Slot slot = std::move(ring_[head_]);
    ring_[head_] = Slot{};
    head_ = (head_ + 1) % ring_.size();
    --unacked_;
    slot.done(ec, {}, detail);
  }
}

std::error_code ClientProtocol::attach(const std::string& topic, std::optional<std::uint64_t> from) {
  auto it = attachments_.find(topic);
  if (it != attachments_.end() && it->second.state != State::detaching)
    return make_error_code(polybus::errc::already_subscribed);
  Attachment a{State::attaching, from, false};
  attachments_[topic] = a;
  if (connected_) send_attach(topic, a);
  return {};
}

void ClientProtocol::send_attach(const std::string& topic, const Attachment& a) {
  OutPiece piece;
  append_attach(piece.bytes, topic, a.offset.has_value(), a.offset.value_or(0));
  output_.push_back(std::move(piece));
}

void ClientProtocol::detach(const std::string& topic) {
  auto it = attachments_.find(topic);
  if (it == attachments_.end() || it->second.state == State::detaching) return;
  it->second.state = State::detaching;
  if (connected_) {
    OutPiece piece;
    append_detach(piece.bytes, topic);
    output_.push_back(std::move(piece));
  }
}

std::optional<std::uint64_t> ClientProtocol::offset(const std::string& topic) const {
  auto it = attachments_.find(topic);
  return it == attachments_.end() ? std::nullopt : it->second.offset;
}

void ClientProtocol::ping(std::uint64_t timestamp) {
  if (!connected_) return;
  OutPiece piece;
  append_ping(piece.bytes, timestamp);
  output_.push_back(std::move(piece));
}

void ClientProtocol::connected() {
  connected_ = true;
  parser_.reset();
  // The document's order: pending ATTACHes, attached topics from their offsets, pending
  // DETACHes, then every unacknowledged PUBLISH in sequence order with its original number.
  for (auto& [topic, a] : attachments_)
    if (a.state == State::attaching) send_attach(topic, a);
  for (auto& [topic, a] : attachments_)
    if (a.state == State::attached) {
      a.state = State::attaching;
      send_attach(topic, a);
    }
  for (auto it = attachments_.begin(); it != attachments_.end();) {
    if (it->second.state == State::detaching) {
      OutPiece piece;
      append_detach(piece.bytes, it->first);
      output_.push_back(std::move(piece));
      // A fresh connection never had this attachment: nothing more to wait for.
      it = attachments_.erase(it);
    } else {
      ++it;
    }
  }
  for (std::size_t i = 0; i < unacked_; ++i) send_publish(ring_[(head_ + i) % ring_.size()]);
}

void ClientProtocol::disconnected() {
  connected_ = false;
  parser_.reset();
  output_.clear();  // the next connection gets the resend instead
}

void ClientProtocol::receive(const std::shared_ptr<const void>& owner, std::string_view bytes) {
  while (!bytes.empty() && connected_) {
    Frame frame;
    auto result = parser_.feed(bytes, frame);
    if (result.error == errc::frame_too_large)
      return handler_.on_failure(
          result.error, "a frame from the Figg server declares a payload of " +
                            std::to_string(parser_.declared_size()) + " bytes: exceeds max_frame_size=" +
                            std::to_string(parser_.max_payload()));
    if (result.error) return handler_.on_failure(result.error, "bad frame from the Figg server: " + result.error.message());
    bytes.remove_prefix(result.consumed);
    if (!result.has_frame) continue;
    ++frames_;
    handle(frame, frame.in_parser_buffer ? nullptr : owner);
  }
}

void ClientProtocol::handle(const Frame& frame, const std::shared_ptr<const void>& owner) {
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
      auto it = attachments_.find(std::string(data.topic));
      // DATA for a topic no longer wanted (the real server ignores DETACH) is dropped.
      if (it == attachments_.end() || it->second.state == State::detaching) return;
      it->second.offset = data.offset;
      it->second.received = true;
      std::shared_ptr<const void> keep = owner;
      std::string_view view = data.data;
      if (!keep) {
        auto copy = std::make_shared<std::string>(data.data);
        view = *copy;
        keep = std::move(copy);
      }
      handler_.on_data(it->first, data.offset, view, keep);
      return;
    }
    case MessageType::attached: {
      TopicOffset attached;
      if ((ec = parse_attached(frame.payload, attached))) break;
      auto it = attachments_.find(std::string(attached.topic));
      if (it == attachments_.end() || it->second.state != State::attaching) return;
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
      auto it = attachments_.find(std::string(topic));
      if (it != attachments_.end() && it->second.state == State::detaching) attachments_.erase(it);
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
  if (ec) handler_.on_failure(ec, "malformed Figg message of type " +
                                      std::to_string(static_cast<int>(frame.type)) + ": " + ec.message());
}

}  // namespace polybus::figg
