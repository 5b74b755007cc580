// SPDX-License-Identifier: Apache-2.0
// Figg's client side as a state machine, sans I/O (no socket, no clock, no completions): the
// publish window (a fixed ring of unacknowledged messages), the attachments and their offsets,
// and what to send again, in the document's order, after a reconnect. The owner feeds received
// bytes and says when the connection comes and goes; the machine pushes the bytes to send and
// what happened to its handler, as AMQP-CPP's ConnectionHandler is told.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "polybus/adapter/payloads.hpp"
#include "polybus/adapter/topic_name.hpp"
#include "polybus/figg/codec.hpp"
#include "polybus/io/kept_copies.hpp"

namespace polybus::figg {

class MachineHandler {
 public:
  virtual ~MachineHandler() = default;
  // Bytes to send, in order: the machine's own, and payloads it keeps for resending (shared,
  // not copied). Only while connected.
  virtual void send(std::string bytes) = 0;
  virtual void send(std::shared_ptr<const std::string> payload) = 0;
  // Small bytes the machine reuses its buffer for (a header): the handler copies them.
  virtual void send_copy(std::string_view bytes) { send(std::string(bytes)); }
  // Room to write more publishes (Transport::write_room). A "no" holds the window's unsent
  // publishes until the owner calls send_unsent(): a large window of large payloads must not
  // overfill the write queue, which would end the connection, and again after every reconnect.
  virtual bool write_room() { return true; }
  // The oldest `count` publishes of the window are acknowledged, in the order published.
  virtual void on_acked(std::size_t count) = 0;
  virtual void on_data(const std::string& topic, std::uint64_t offset, std::string_view data,
                       const std::shared_ptr<const void>& owner) = 0;
  virtual void on_attached(const std::string& topic, std::uint64_t offset) = 0;
  // After a reconnect the topic's log ends before where this client was (log_end < resume_from):
  // the server restarted and kept nothing. Delivery resumes from the log's start.
  virtual void on_log_reset(const std::string& topic, std::uint64_t resume_from,
                            std::uint64_t log_end) = 0;
  virtual void on_pong(std::uint64_t timestamp) = 0;
  // The server broke the protocol: the owner ends the connection.
  virtual void on_failure(std::error_code ec, const std::string& detail) = 0;
};

class Machine {
 public:
  Machine(std::size_t window, std::size_t max_payload, MachineHandler& handler);
  Machine(const Machine&) = delete;  // it keeps an iterator into its own map
  Machine& operator=(const Machine&) = delete;

  // Publishing. publish() needs room in the window (window_full() false); the owner keeps what
  // completes it, in the same order, until on_acked() or abandon().
  bool window_full() const { return unacked_ == ring_.size(); }
  std::size_t unacked() const { return unacked_; }
  // Of those, not yet written on this connection (none is while disconnected).
  std::size_t unwritten() const { return unacked_ - written_; }
  // The payload is kept (KeptPayload: by value when small, else shared) until it is acked.
  // The data taken by rvalue: moved once, into the window's slot.
  void publish(TopicName topic, std::string&& data);
  // Writes the window's publishes not yet written on this connection, while write_room() says so.
  void send_unsent();

  // Attachments: one per topic. attach() fails with errc::already_subscribed for a topic that is
  // attached or attaching. from: resume from this offset; empty: the latest message.
  std::error_code attach(const std::string& topic, std::optional<std::uint64_t> from);
  void detach(const std::string& topic);
  // Where delivery resumes: the offset after the last DATA, or ATTACHED's offset.
  std::optional<std::uint64_t> offset(const std::string& topic) const;

  void ping(std::uint64_t timestamp);

  // The connection: connected() queues the resend in the document's order.
  void connected();
  void disconnected();
  bool is_connected() const { return connected_; }
  void receive(const std::shared_ptr<const void>& owner, std::string_view bytes);
  // Part of a frame is held (the transport's frame_timeout runs); frames completed so far.
  bool partial_frame() const { return !parser_.idle(); }
  std::uint64_t frames() const { return frames_; }

  // Forgets every unacknowledged publish (on close; the owner fails their completions).
  void abandon();

 private:
  // probing: after a reconnect, an ATTACH at the latest message asks where the log ends before
  // delivery resumes; catching_up: a second ATTACH replays what was missed up to that end.
  enum class State { attaching, attached, detaching, probing, catching_up };
  struct Attachment {
    State state;
    std::optional<std::uint64_t> offset;
    bool received = false;  // DATA arrived since the subscription began
    // Set once a reconnect found messages missed: the log's end when the connection came back.
    // This connection then carries two attachments of the topic (the real server cannot detach
    // one), so each offset is delivered once, in order, and the live copy of a message waits
    // for the replay to reach it.
    std::optional<std::uint64_t> catch_up_to;
  };
  // False for DATA already delivered, or that the replay will deliver in its turn.
  static bool deliverable(const Attachment& a, std::uint64_t offset);
  struct Slot {
    std::uint64_t seq = 0;
    TopicName topic;
    KeptPayload data;
  };

  void send_attach(const std::string& topic, const Attachment& a);
  void send_publish(const Slot& slot);
  void handle(const Frame& frame, const std::shared_ptr<const void>& owner);
  void acked(std::uint64_t seq);
  using Attachments = std::map<std::string, Attachment, std::less<>>;
  // Every erase goes through here: the DATA path's remembered attachment must not dangle.
  Attachments::iterator erase_attachment(Attachments::iterator it) {
    if (it == last_data_) last_data_ = attachments_.end();
    return attachments_.erase(it);
  }
  // The ring's slot k places after head_ (k <= its size): a wrap, not a division per publish.
  std::size_t ring_index(std::size_t k) const {
    const std::size_t i = head_ + k;
    return i < ring_.size() ? i : i - ring_.size();
  }

  MachineHandler& handler_;
  FrameParser parser_;
  KeptCopies kept_;  // the frames that straddled two reads, for the messages viewing them
  std::vector<Slot> ring_;
  SharedPayloadBlocks payload_blocks_;  // for the ring's large payloads
  std::string frame_scratch_;           // a PUBLISH frame (or header), rebuilt for each publish
  std::size_t head_ = 0;                // oldest unacknowledged
  std::size_t unacked_ = 0;
  std::size_t written_ = 0;  // of the unacknowledged, from head_: written on this connection
  std::uint64_t next_seq_ = 1;
  std::uint64_t highest_sent_ = 0;  // the largest seq written in a PUBLISH on this connection
  // std::less<>: found by a frame's view of the topic, not a string made per DATA frame.
  Attachments attachments_;
  Attachments::iterator last_data_ = attachments_.end();  // the last DATA frame's attachment
  bool connected_ = false;
  std::uint64_t frames_ = 0;
};

}  // namespace polybus::figg
