// SPDX-License-Identifier: Apache-2.0
// The Figg test broker's listener, metrics and public face, Broker.
#include "session.hpp"

namespace polybus::figg::testing {

void BrokerImpl::accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec) return;
    ++accepted_;
    auto session = std::make_shared<Session>(*this, std::move(socket), accepted_);
    sessions_.insert(session.get());
    owned_.push_back(session);
    session->start();
    accept();
  });
}

void BrokerImpl::published(const std::string& name) {
  for (auto* session : sessions_) session->pump(name);
}

metrics::BrokerMetrics BrokerImpl::metrics() const {
  metrics::BrokerMetrics m;
  m.scheme = "figg";
  m.running = acceptor_.is_open();
  m.connections = sessions_.size();
  m.connections_accepted = accepted_;
  m.bytes_received = bytes_received_;
  m.bytes_sent = bytes_sent_;
  // Every attached topic has a queue: its consumers, and the log they have yet to be sent.
  std::map<std::string, metrics::BrokerQueueMetrics> queues;
  for (const Session* session : sessions_) {
    session->each_attachment([&](const std::string& name, std::uint64_t next_number) {
      auto& q = queues[name];
      ++q.consumers;
      auto topic = topics_.find(name);
      if (topic == topics_.end() || next_number == kNeverDelivers) return;
      const std::uint64_t from = std::max(next_number, topic->second.first_number);
      if (from < topic->second.end_number()) q.queued += topic->second.end_number() - from;
    });
  }
  for (const auto& [name, topic] : topics_) {  // sorted by name
    m.topics.push_back({name, topic.end_number(), topic.log.size()});
    auto& q = queues[name];
    q.delivered = topic.delivered;
  }
  for (auto& [name, q] : queues) {
    q.topic = name;
    m.queues.push_back(std::move(q));
  }
  return m;
}

void BrokerImpl::close_all() {
  std::error_code ignored;
  acceptor_.close(ignored);
  for (auto& session : owned_) session->close();
  sessions_.clear();
  owned_.clear();
  // The real server reloads nothing: restarted, every log starts again at offset 0.
  if (options_.real_server_quirks) topics_.clear();
}

std::unique_ptr<Broker> Broker::launch(BrokerOptions options) {
  return std::make_unique<Broker>(std::make_unique<BrokerImpl>(options));
}
Broker::Broker(std::unique_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() = default;
std::uint16_t Broker::port() const {
  return impl_->port_;
}
std::string Broker::address() const {
  return "127.0.0.1:" + std::to_string(impl_->port_);
}
void Broker::stop() {
  impl_->run([this] {
    impl_->port_hold_.close_listener(impl_->acceptor_);  // until start() listens again
    impl_->close_all();
  });
}
void Broker::start() {
  impl_->run([this] {
    if (!impl_->acceptor_.is_open()) impl_->listen(impl_->port_);
  });
}
metrics::BrokerMetrics Broker::metrics() const {
  return impl_->run([this] { return impl_->metrics(); });
}
std::size_t Broker::connections() const {
  return impl_->run([this] { return impl_->sessions_.size(); });
}
std::uint64_t Broker::end_offset(const std::string& topic) const {
  return impl_->run([this, &topic] { return impl_->topic(topic).end; });
}
std::uint64_t Broker::messages(const std::string& topic) const {
  return impl_->run([this, &topic] { return impl_->topic(topic).end_number(); });
}
std::uint64_t Broker::pongs() const {
  std::lock_guard<std::mutex> lock(impl_->pongs_mutex_);
  return impl_->pongs_;
}
bool Broker::wait_for_pongs(std::uint64_t n, std::chrono::milliseconds bound) const {
  std::unique_lock<std::mutex> lock(impl_->pongs_mutex_);
  return impl_->pongs_changed_.wait_for(lock, bound, [&] { return impl_->pongs_ >= n; });
}
void Broker::set_answer_pings(bool answer) {
  impl_->run([this, answer] { impl_->answer_pings_ = answer; });
}

polybus::testing::Journal& Broker::journal() const {
  return impl_->journal_;
}

polybus::testing::FaultRules& Broker::faults() const {
  return impl_->faults_;
}

}  // namespace polybus::figg::testing
