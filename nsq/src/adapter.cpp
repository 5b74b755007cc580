// SPDX-License-Identifier: Apache-2.0
// The NSQ adapter: a producer shared by every publish of the client, and a consumer per
// subscription, each subscription its own channel (the group, or an ephemeral channel).
#include <mutex>
#include <random>

#include "consumer.hpp"
#include "lookupd_client.hpp"
#include "options.hpp"
#include "polybus/error.hpp"
#include "polybus/nsq.hpp"
#include "producer.hpp"

namespace polybus::nsq {
namespace {

constexpr std::uint16_t kNsqdPort = 4150;
constexpr std::uint16_t kLookupdHttpPort = 4161;

Capabilities nsq_capabilities() {
  Capabilities c;
  c.publish = c.subscribe = c.publish_confirmed = c.reconnect_policy = true;
  c.ack = c.nack_with_delay = c.touch = c.redelivery_on_timeout = true;
  c.consumer_groups = true;  // channels
  c.batch_publish = c.deferred_publish = true;
  c.durable = true;  // nsqd keeps its queues across a clean restart
  c.ordered_delivery = false;
  c.replay_from_offset = false;
  c.request_reply = false;
  return c;
}

std::string ephemeral_channel() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return "polybus-" + std::to_string(engine() % 100000000000ULL) + "#ephemeral";
}

class NsqAdapter : public Adapter {
 public:
  NsqAdapter(AdapterContext& context, bool via_lookupd)
      : context_(std::make_shared<const AdapterContext>(context)),
        settings_(Settings::from(context.options())) {
    const auto& url = context.url();
    if (via_lookupd)
      lookupds_ = url.hosts_or_throw(kLookupdHttpPort);
    else
      nsqds_ = url.hosts_or_throw(kNsqdPort);
    if (!url.path.empty() && url.path != "/")
      throw Error(polybus::errc::invalid_url, url.scheme + ": unexpected path '" + url.path + "'");
    Producer::Discover discover;
    if (via_lookupd) {
      discover = [context = context_, settings = settings_,
                  lookupds = lookupds_](std::function<void(Producer::Discovered)> found) {
        auto result = std::make_shared<Producer::Discovered>();
        for (const auto& lookupd : lookupds)
          result->where += (result->where.empty() ? "" : ",") + lookupd.to_string();
        context->state(ConnectionState::connecting, result->where);
        auto left = std::make_shared<std::size_t>(lookupds.size());
        for (const auto& lookupd : lookupds) {
          http_get(context, settings.transport, lookupd, "/nodes", std::chrono::milliseconds(5000),
                   [context, result, left, found, lookupd](HttpResult r) {
                     std::vector<LookupProducer> all;
                     std::error_code bad;
                     std::size_t rejected = 0;
                     if (!r.ec && r.status == 200 &&
                         !(bad = parse_lookup_response(r.body, all, &rejected))) {
                       // The good entries are used; the bad ones are said, not fatal.
                       if (rejected > 0)
                         context->error(make_error_code(polybus::errc::protocol_error),
                                        skipped_producers_text(lookupd, rejected, all.size()));
                       for (auto& p : all)
                         result->nsqds.push_back({p.broadcast_address, p.tcp_port});
                     } else {
                       const std::string why = r.ec ? (r.detail.empty() ? r.ec.message() : r.detail)
                                               : r.status != 200
                                                   ? "HTTP " + std::to_string(r.status)
                                                   : "a malformed /nodes answer: " + bad.message();
                       result->failure += (result->failure.empty() ? "" : "; ") +
                                          std::string("nsqlookupd ") + lookupd.to_string() + ": " +
                                          why;
                     }
                     if (--*left == 0) found(std::move(*result));
                   });
        }
      };
    }
    producer_ = std::make_shared<Producer>(context_, settings_, nsqds_, std::move(discover));
  }

  Capabilities capabilities() const override { return nsq_capabilities(); }

  void publish(PublishWork work) override { producer_->publish(std::move(work)); }

  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    if (!valid_topic_name(spec.topic))
      throw Error(polybus::errc::invalid_argument,
                  "nsq: '" + spec.topic + "' is not a valid topic (1-64 of [.a-zA-Z0-9_-])");
    std::string channel = spec.group.empty() ? ephemeral_channel() : spec.group;
    if (!valid_channel_name(channel))
      throw Error(polybus::errc::invalid_argument,
                  "nsq: '" + channel +
                      "' is not a valid channel (1-64 of [.a-zA-Z0-9_-], optional #ephemeral)");
    Consumer::Discovery discovery{nsqds_, lookupds_};
    auto consumer = std::make_shared<Consumer>(context_, settings_, spec.topic, channel,
                                               spec.max_in_flight, discovery, std::move(sink));
    consumers_.push_back(consumer);
    consumer->start();
    return consumer;
  }

  std::string reply_topic(std::string_view unique_name) const override {
    // A consumer through nsqlookupd finds a topic's nsqd at its next poll: the reply to a
    // request would wait for it, up to lookupd_poll_interval.
    if (!lookupds_.empty())
      throw Error(polybus::errc::not_supported,
                  "nsq+lookupd: request/reply over topics needs nsq:// with the nsqd addresses "
                  "(a new reply topic would be found through nsqlookupd only at its next poll)");
    // Ephemeral: nsqd deletes the channel when this client disconnects, then the topic.
    return std::string(unique_name) + "#ephemeral";
  }

  void ping(OpCompletion done) override {
    if (nsqds_.empty() && !lookupds_.empty()) {
      // nsqlookupd's /ping is the health check there.
      auto shared = std::make_shared<OpCompletion>(std::move(done));
      http_get(context_, settings_.transport, lookupds_.front(), "/ping",
               std::chrono::milliseconds(5000), [shared](HttpResult r) {
                 if (r.ec) return (*shared)(r.ec, {}, r.detail);
                 (*shared)(r.status == 200 ? std::error_code{}
                                           : make_error_code(polybus::errc::broker_error),
                           {}, "HTTP " + std::to_string(r.status));
               });
      return;
    }
    producer_->ping(std::move(done));
  }

  void close(Clock::time_point deadline, std::function<void()> done) override {
    producer_->close();
    auto left = std::make_shared<std::size_t>(consumers_.size() + 1);
    auto one_done = [left, done = std::move(done)] {
      if (--*left == 0) done();
    };
    for (auto& weak : consumers_)
      if (auto consumer = weak.lock())
        consumer->stop(deadline, one_done);
      else
        one_done();
    consumers_.clear();
    one_done();
  }

 private:
  std::shared_ptr<const AdapterContext> context_;
  Settings settings_;
  std::vector<HostPort> nsqds_;
  std::vector<HostPort> lookupds_;
  std::shared_ptr<Producer> producer_;
  std::vector<std::weak_ptr<Consumer>> consumers_;
};

SchemeInfo make_scheme(bool via_lookupd) {
  SchemeInfo info;
  info.scheme = via_lookupd ? "nsq+lookupd" : "nsq";
  info.summary = via_lookupd ? "NSQ through nsqlookupd discovery (HTTP addresses of nsqlookupd)"
                             : "NSQ: nsqd 1.x TCP addresses";
  info.options = option_table();
  info.capabilities = nsq_capabilities();
  info.factory = [via_lookupd](AdapterContext& context) -> std::unique_ptr<Adapter> {
    return std::make_unique<NsqAdapter>(context, via_lookupd);
  };
  return info;
}

}  // namespace

void register_scheme() {
  polybus::register_scheme(make_scheme(false));
  polybus::register_scheme(make_scheme(true));
}

}  // namespace polybus::nsq
