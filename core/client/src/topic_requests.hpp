// SPDX-License-Identifier: Apache-2.0
// Internal: request/reply over plain topics, for a protocol without its own (NSQ, Figg), when the
// envelope carries headers (envelope=cloudevents).
//
// A request is published to its topic with two headers: `polybuscorrelation`, unique to the
// request, and `polybusreplyto`, the requesting client's reply topic. serve() subscribes to the
// topic (on NSQ with a channel its servers share) and publishes each reply to the request's
// `polybusreplyto` with its `polybuscorrelation`, and `polybuserror` with the failure's text
// when the handler failed. The
// requester's subscription to its reply topic completes the request that the correlation id
// names. Any client that reads and sets these three attributes can take either side.
//
// The reply topic is the client's own, made from a random name at its first request: on NSQ an
// ephemeral topic with an ephemeral channel, which nsqd deletes when the client disconnects.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "polybus/adapter/adapter.hpp"
#include "polybus/client.hpp"

namespace polybus::detail {

class ClientCore;
class ClientShared;
class SubscriptionCore;

class TopicRequests : public MessageBackend, public std::enable_shared_from_this<TopicRequests> {
 public:
  // Prefixed: correlationid or replyto may be an application's own attributes.
  static constexpr std::string_view kCorrelationId = "polybuscorrelation";
  static constexpr std::string_view kReplyTo = "polybusreplyto";
  static constexpr std::string_view kReplyError = "polybuserror";
  // The topic label the replies a server publishes are counted under (every requester has a
  // reply topic of its own).
  static constexpr const char* kRepliesMetricTopic = "_replies";

  // A name no other client has: the base of its reply topic and of its correlation ids.
  static std::string unique_name();

  TopicRequests(std::weak_ptr<ClientCore> client, std::shared_ptr<ClientShared> shared,
                std::string unique_name, std::string reply_topic,
                std::uint32_t reply_max_in_flight);

  const std::string& reply_topic() const { return reply_topic_; }

  // Calling thread: sets a request's correlation id and reply topic in its headers (an
  // application's own value for either is refused: the replies could not find the request).
  Status address(std::string_view topic, Headers& headers, std::uint64_t& correlation);

  // Strand: the request waits for its reply under `request` (its deadline armed); it is
  // published once the reply subscription is confirmed, at once when it is.
  void send(TopicName topic, Payloads payloads, std::uint64_t correlation, OpCompletion request,
            std::shared_ptr<Headers> reply_headers, Clock::time_point deadline);
  // Strand: the request completed (reply, deadline, close): its correlation id is let go.
  void forget(std::uint64_t correlation) { pending_.erase(correlation); }

  // The subscription to the reply topic, which a close leaves running until the requests
  // waiting on it are answered.
  bool is_reply_subscription(const SubscriptionCore* sub) const {
    return sub == subscription_.get();
  }

  // A request that came over a topic names where its reply goes.
  static bool answerable(const Headers& headers);

  // MessageBackend, for requests served over topics (strand). The adapter's own backend
  // (MessageState::request_backend) acknowledges each once its reply is on its way.
  void ack(MessageState& message) override;
  void nack(MessageState& message, std::chrono::milliseconds delay) override;
  void touch(MessageState& message) override;
  void reply(MessageState& message, std::string payload, std::error_code ec,
             std::string detail) override;

 private:
  struct Pending {
    OpCompletion request;
    std::shared_ptr<Headers> reply_headers;  // the reply's attributes, for Reply::headers
  };
  struct Unsent {  // published once the reply subscription is confirmed
    TopicName topic;
    Payloads payloads;
    std::uint64_t correlation;
    Clock::time_point deadline;
  };

  void subscribe_replies();                                     // strand
  void subscription_settled(const Status& status, bool ended);  // strand
  void publish(Unsent unsent);                                  // strand
  // Sets the waiting-requests gauge to the requests held unsent (strand).
  void count_waiting();
  void on_reply(Message& message);  // strand
  void fail(std::uint64_t correlation, std::error_code ec, const std::string& cause);
  // The request a reply's correlation id names (0: none of this client's).
  std::uint64_t correlation_of(std::string_view value) const;
  void settle_request(MessageState& message);  // acks it through the adapter's backend

  std::weak_ptr<ClientCore> client_;
  std::shared_ptr<ClientShared> shared_;
  const std::string reply_topic_;
  const std::string correlation_prefix_;
  const std::uint32_t reply_max_in_flight_;
  std::atomic<std::uint64_t> next_correlation_{0};

  // Strand only:
  // By the number after the prefix: the header's text is parsed once, never kept.
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::vector<Unsent> unsent_;
  std::shared_ptr<SubscriptionCore> subscription_;
  bool confirmed_ = false;
};

}  // namespace polybus::detail
