// SPDX-License-Identifier: Apache-2.0
// The Figg adapter: the abstraction mapped onto one Connection (connection.hpp), which
// reconnects forever with backoff, publishes through a fixed window of unacknowledged messages
// and resumes each subscription from its last offset after every reconnect.
#include "connection.hpp"
#include "options.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/figg.hpp"

namespace polybus::figg {
namespace {

constexpr std::uint16_t kDefaultPort = 8119;

Capabilities figg_capabilities() {
  Capabilities c;
  c.replay_from_offset = true;
  c.ordered_delivery = true;
  c.publish = c.subscribe = c.reconnect_policy = true;
  c.publish_confirmed = true;
  c.durable = false;  // the real server reloads nothing after a restart
  return c;
}

std::shared_ptr<Connection> make_connection(const AdapterContext& context) {
  if (context.url().hosts.size() != 1)
    throw Error(polybus::errc::invalid_url, "figg: one server address expected (figg://host:port)");
  return std::make_shared<Connection>(context, context.url().hosts_or_throw(kDefaultPort).front());
}

class FiggSubscription : public AdapterSubscription {
 public:
  FiggSubscription(std::shared_ptr<Connection> connection, std::string topic)
      : connection_(std::move(connection)), topic_(std::move(topic)) {}
  void unsubscribe(OpCompletion done) override {
    // DETACHED may never come (the real server ignores DETACH): delivery stops at once.
    connection_->detach(topic_);
    hold(false);
    done({});
  }
  void pause() override { connection_->pause(topic_); }
  void resume() override { connection_->resume(topic_); }
  bool has_own_hold() const override { return true; }
  void hold(bool on) override {
    if (on == held_) return;
    held_ = on;
    connection_->hold(on);
  }
  void set_max_in_flight(std::uint32_t) override {}  // Figg has no credit; TCP paces delivery

 private:
  std::shared_ptr<Connection> connection_;
  std::string topic_;
  bool held_ = false;
};

class FiggAdapter : public Adapter {
 public:
  explicit FiggAdapter(AdapterContext& context) : connection_(make_connection(context)) {
    connection_->start();
  }
  Capabilities capabilities() const override { return figg_capabilities(); }
  void publish(PublishWork work) override { connection_->publish(std::move(work)); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    if (auto ec = connection_->attach(spec.topic, spec.from_offset, sink))
      throw Error(ec, "figg: '" + spec.topic + "' already has a subscription on this client");
    return std::make_shared<FiggSubscription>(connection_, spec.topic);
  }
  void ping(OpCompletion done) override { connection_->ping(std::move(done)); }
  void close(Clock::time_point, std::function<void()> done) override {
    connection_->close(std::move(done));
  }

 private:
  std::shared_ptr<Connection> connection_;
};

}  // namespace

void register_scheme() {
  SchemeInfo info;
  info.scheme = "figg";
  info.summary = "Figg: ordered topics with byte offsets, at-least-once publish window";
  info.options = option_table();
  info.capabilities = figg_capabilities();
  info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
    return std::make_unique<FiggAdapter>(context);
  };
  polybus::register_scheme(std::move(info));
}

}  // namespace polybus::figg
