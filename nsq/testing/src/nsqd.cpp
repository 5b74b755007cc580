// SPDX-License-Identifier: Apache-2.0
// Nsqd, the public face of the test nsqd: every call hops onto the server's io thread.
#include "nsqd_server.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing {

using detail::Channel;
using detail::NsqdServer;
using detail::Topic;

std::unique_ptr<Nsqd> Nsqd::start(NsqdOptions options) {
  return std::unique_ptr<Nsqd>(new Nsqd(std::move(options)));
}

Nsqd::Nsqd(NsqdOptions options) : server_(std::make_unique<NsqdServer>(std::move(options))) {}

Nsqd::~Nsqd() = default;

std::uint16_t Nsqd::tcp_port() const {
  return server_->port();
}

std::string Nsqd::tcp_address() const {
  return "127.0.0.1:" + std::to_string(tcp_port());
}

std::uint16_t Nsqd::http_port() const {
  return server_->http_port();
}

std::string Nsqd::http_address() const {
  return http_port() == 0 ? std::string() : "127.0.0.1:" + std::to_string(http_port());
}

const NsqdOptions& Nsqd::options() const {
  return server_->options();
}

void Nsqd::stop() {
  server_->run([this] { server_->stop(); });
}

void Nsqd::resume() {
  server_->run([this] { server_->start(); });
}

void Nsqd::restart() {
  server_->run([this] {
    server_->stop();
    server_->start();
  });
}

bool Nsqd::running() const {
  return server_->run([this] { return server_->listening(); });
}

void Nsqd::register_with(const Lookupd& lookupd) {
  server_->run([this, registry = lookupd.registry_] { server_->register_with(registry); });
}

std::size_t Nsqd::client_count() const {
  return server_->run([this] { return server_->connection_count(); });
}

metrics::BrokerMetrics Nsqd::metrics() const {
  return server_->run([this] { return server_->metrics(); });
}

std::vector<std::string> Nsqd::topics() const {
  return server_->run([this] {
    std::vector<std::string> names;
    for (const auto& [name, topic] : server_->broker().topics()) names.push_back(name);
    return names;
  });
}

std::vector<std::string> Nsqd::channels(const std::string& topic) const {
  return server_->run([&] {
    std::vector<std::string> names;
    if (const Topic* found = server_->broker().find_topic(topic)) {
      for (const auto& [name, channel] : found->channels()) names.push_back(name);
    }
    return names;
  });
}

bool Nsqd::has_topic(const std::string& topic) const {
  return server_->run([&] { return server_->broker().find_topic(topic) != nullptr; });
}

bool Nsqd::has_channel(const std::string& topic, const std::string& channel) const {
  return server_->run([&] { return server_->broker().find_channel(topic, channel) != nullptr; });
}

std::uint64_t Nsqd::topic_depth(const std::string& topic) const {
  return server_->run([&]() -> std::uint64_t {
    const Topic* found = server_->broker().find_topic(topic);
    return found == nullptr ? 0 : found->depth();
  });
}

std::uint64_t Nsqd::topic_message_count(const std::string& topic) const {
  return server_->run([&]() -> std::uint64_t {
    const Topic* found = server_->broker().find_topic(topic);
    return found == nullptr ? 0 : found->message_count;
  });
}

namespace {

// A channel statistic, 0 for an unknown channel.
template <typename Value, typename Read>
Value channel_stat(NsqdServer& server, const std::string& topic, const std::string& channel,
                   Read read) {
  return server.run([&]() -> Value {
    const Channel* found = server.broker().find_channel(topic, channel);
    return found == nullptr ? Value{} : static_cast<Value>(read(*found));
  });
}

}  // namespace

std::uint64_t Nsqd::channel_depth(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::uint64_t>(*server_, topic, channel,
                                     [](const Channel& c) { return c.depth(); });
}

std::uint64_t Nsqd::topic_backend_depth(const std::string& topic) const {
  return server_->run([&]() -> std::uint64_t {
    const Topic* found = server_->broker().find_topic(topic);
    return found == nullptr ? 0 : found->backend_depth();
  });
}

std::uint64_t Nsqd::channel_backend_depth(const std::string& topic,
                                          const std::string& channel) const {
  return channel_stat<std::uint64_t>(*server_, topic, channel,
                                     [](const Channel& c) { return c.backend_depth(); });
}

polybus::testing::Journal& Nsqd::journal() const {
  return server_->journal();
}

polybus::testing::FaultRules& Nsqd::faults() const {
  return server_->faults();
}

std::uint16_t Nsqd::admin_port() const {
  return server_->admin_port();
}

std::uint64_t Nsqd::disk_bytes() const {
  return server_->run([&] { return server_->broker().disk_bytes(); });
}

std::size_t Nsqd::in_flight(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::size_t>(*server_, topic, channel,
                                   [](const Channel& c) { return c.in_flight(); });
}

std::int64_t Nsqd::max_ready_count(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::int64_t>(*server_, topic, channel,
                                    [](const Channel& c) { return c.max_ready_count(); });
}

std::int64_t Nsqd::ready_count(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::int64_t>(*server_, topic, channel,
                                    [](const Channel& c) { return c.ready_count(); });
}

std::size_t Nsqd::deferred(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::size_t>(*server_, topic, channel,
                                   [](const Channel& c) { return c.deferred(); });
}

std::size_t Nsqd::subscriber_count(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::size_t>(*server_, topic, channel,
                                   [](const Channel& c) { return c.subscriber_count(); });
}

std::uint64_t Nsqd::timeout_count(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::uint64_t>(*server_, topic, channel,
                                     [](const Channel& c) { return c.timeout_count(); });
}

std::uint64_t Nsqd::requeue_count(const std::string& topic, const std::string& channel) const {
  return channel_stat<std::uint64_t>(*server_, topic, channel,
                                     [](const Channel& c) { return c.requeue_count(); });
}

std::vector<std::int64_t> Nsqd::ready_counts_set(const std::string& topic,
                                                 const std::string& channel) const {
  return channel_stat<std::vector<std::int64_t>>(*server_, topic, channel, [](const Channel& c) {
    return std::vector<std::int64_t>(c.ready_counts_set().begin(), c.ready_counts_set().end());
  });
}

std::vector<std::chrono::milliseconds> Nsqd::requeue_delays(const std::string& topic,
                                                            const std::string& channel) const {
  return channel_stat<std::vector<std::chrono::milliseconds>>(
      *server_, topic, channel, [](const Channel& c) {
        return std::vector<std::chrono::milliseconds>(c.requeue_delays().begin(),
                                                      c.requeue_delays().end());
      });
}

bool Nsqd::wait_until(const std::function<bool()>& condition,
                      std::chrono::milliseconds bound) const {
  return server_->wait_until(condition, bound);
}

}  // namespace polybus::nsq::testing
