// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <asio.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "polybus/figg/codec.hpp"
#include "polybus/figg_testing.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/io/server_stream.hpp"
#include "polybus/testing.hpp"

namespace polybus::figg::testing {

using asio::ip::tcp;

namespace {

constexpr auto kTlsHandshakeBound = std::chrono::seconds(5);  // as nsqd

struct Entry {
  std::uint64_t start;  // byte position of the message in the log
  std::shared_ptr<const std::string> data;
  std::uint64_t next() const { return start + 4 + data->size(); }
};

struct Topic {
  std::uint64_t first_number = 0;  // absolute number of log.front()
  std::uint64_t delivered = 0;     // DATA frames sent, to every attachment
  std::uint64_t end = 0;           // byte position after the last message
  std::size_t bytes = 0;
  std::deque<Entry> log;
  std::uint64_t end_number() const { return first_number + log.size(); }
  std::uint64_t first_offset() const { return log.empty() ? end : log.front().start; }
};

class Session;

}  // namespace

class BrokerImpl {
 public:
  explicit BrokerImpl(BrokerOptions options)
      : options_(std::move(options)),
        tls_context_(options_.tls_cert_file.empty() || options_.tls_key_file.empty()
                         ? nullptr
                         : make_server_tls_context(options_.tls_cert_file, options_.tls_key_file)),
        acceptor_(io_.context()) {
    io_.run([this] { listen(options_.port); });
  }
  ~BrokerImpl() {
    io_.run([this] { close_all(); });
    io_.stop_and_join();
  }

  template <typename Fn>
  auto run(Fn fn) -> decltype(fn()) {
    return io_.run(std::move(fn));
  }

  void listen(std::uint16_t port) {
    tcp::endpoint endpoint(asio::ip::make_address(options_.host), port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_hold_.release();
    port_ = acceptor_.local_endpoint().port();
    accept();
  }
  void accept();
  void close_all();

  // Called by sessions (io thread).
  Topic& topic(const std::string& name) { return topics_[name]; }
  void published(const std::string& name);
  // A session that ended: nothing of it is kept (a long-lived broker serves endless clients).
  void forget(Session* session) {
    sessions_.erase(session);
    owned_.erase(std::remove_if(owned_.begin(), owned_.end(),
                                [session](const auto& s) { return s.get() == session; }),
                 owned_.end());
  }
  metrics::BrokerMetrics metrics() const;

  BrokerOptions options_;
  std::shared_ptr<asio::ssl::context> tls_context_;  // null: plain TCP
  bool answer_pings_ = true;
  // Counted on the io thread, waited for on others.
  mutable std::mutex pongs_mutex_;
  mutable std::condition_variable pongs_changed_;
  std::uint64_t pongs_ = 0;
  IoThread io_;  // before everything that uses its io_context: destroyed after them
  tcp::acceptor acceptor_;
  PortHold port_hold_{io_.context()};  // the port, while stopped
  std::uint16_t port_ = 0;
  std::map<std::string, Topic> topics_;
  std::set<Session*> sessions_;
  std::vector<std::shared_ptr<Session>> owned_;
  std::uint64_t accepted_ = 0;
  std::uint64_t bytes_received_ = 0;
  std::uint64_t bytes_sent_ = 0;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(BrokerImpl& broker, tcp::socket socket)
      : broker_(broker),
        stream_(std::move(socket), broker.tls_context_),
        parser_(broker.options_.max_payload) {}

  // The TLS handshake, if any, then reading; a client that fails the handshake is closed.
  void start() {
    stream_.async_handshake(kTlsHandshakeBound, [self = shared_from_this()](std::error_code ec) {
      if (ec) return self->finish();
      self->read();
    });
  }
  void close() { stream_.close(); }
  // Sends what topic `name`'s attachments have not been sent yet, up to the high-water mark.
  // One topic's publish pumps that topic's attachments, so that a session attached to 10,000
  // topics does not walk them all per message.
  void pump(const std::string& name);
  // For metrics: each attachment's topic and the messages it has not been sent yet.
  template <typename Visit>
  void each_attachment(Visit visit) const {
    for (const auto& [name, attachment] : attachments_) visit(name, attachment.next_number);
  }

 private:
  struct Attachment {
    std::uint64_t next_number;  // next message to send, by absolute number
  };

  void read() {
    stream_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->finish();
                              self->broker_.bytes_received_ += n;
                              self->received(std::string_view(self->buffer_, n));
                              if (self->stream_.is_open()) self->read();
                            });
  }
  void finish() {
    close();
    broker_.forget(this);
  }
  void received(std::string_view bytes) {
    while (!bytes.empty()) {
      Frame frame;
      auto result = parser_.feed(bytes, frame);
      // Unlike the real server (which crashes), a malformed message only closes this connection.
      if (result.error) return finish();
      bytes.remove_prefix(result.consumed);
      if (result.has_frame && !handle(frame)) return finish();
    }
  }
  bool handle(const Frame& frame);
  void send(std::string bytes, std::shared_ptr<const std::string> payload = nullptr) {
    queued_ += bytes.size() + (payload ? payload->size() : 0);
    queue_.push_back({std::move(bytes), std::move(payload)});
    write();
  }
  void write() {
    if (writing_ || queue_.empty() || !stream_.is_open()) return;
    writing_ = true;
    auto batch = std::make_shared<std::vector<Piece>>();
    std::vector<asio::const_buffer> buffers;
    while (!queue_.empty() && batch->size() < 64) {
      batch->push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    for (auto& p : *batch) {
      buffers.push_back(asio::buffer(p.bytes));
      if (p.payload) buffers.push_back(asio::buffer(*p.payload));
    }
    stream_.async_write(buffers,
                        [self = shared_from_this(), batch](std::error_code ec, std::size_t n) {
                          self->writing_ = false;
                          self->queued_ -= std::min(self->queued_, n);
                          self->broker_.bytes_sent_ += n;
                          if (ec) return self->finish();
                          // History continues as the client reads it: only where it had to
                          // stop at the high-water mark.
                          if (!self->stalled_.empty()) self->pump_stalled();
                          self->write();
                        });
  }

  struct Piece {
    std::string bytes;
    std::shared_ptr<const std::string> payload;
  };

  BrokerImpl& broker_;
  ServerStream stream_;
  FrameParser parser_;
  char buffer_[64 * 1024];
  std::deque<Piece> queue_;
  std::size_t queued_ = 0;
  bool writing_ = false;
  // The topics whose attachments stopped at the high-water mark, in the order they did: after a
  // write, they are pumped in turn from the front until the mark is reached again. Walking every
  // attachment instead cost a session attached to 10,000 topics that walk on every write.
  std::deque<std::string> stalled_;
  std::set<std::string> stalled_names_;
  void mark_stalled(const std::string& name) {
    if (stalled_names_.insert(name).second) stalled_.push_back(name);
  }
  void pump_stalled();
  // The real server keeps every ATTACH of a topic on a connection (each delivers), so with
  // its quirks there can be several per topic; otherwise a new one replaces the old.
  std::multimap<std::string, Attachment> attachments_;
};

// With the real server's quirks, an ATTACH from beyond the log's end delivers nothing, ever.
constexpr std::uint64_t kNeverDelivers = UINT64_MAX;

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

}  // namespace

void BrokerImpl::accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec) return;
    auto session = std::make_shared<Session>(*this, std::move(socket));
    ++accepted_;
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

namespace {
class FiggTestBroker : public polybus::testing::TestBroker {
 public:
  explicit FiggTestBroker(BrokerOptions options)
      : quirks_(options.real_server_quirks), broker_(Broker::launch(options)) {}
  bool answers_ping() const override { return !quirks_; }
  std::string url() const override {
    return "figg://" + broker_->address() +
           "?reconnect_initial=10ms&reconnect_max=200ms&ping_interval=200ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }

 private:
  bool quirks_;
  std::unique_ptr<Broker> broker_;
};
}  // namespace

void register_test_brokers() {
  for (const bool quirks : {false, true}) {
    auto on_port = [quirks](std::uint16_t port) {
      BrokerOptions options;
      options.real_server_quirks = quirks;
      options.port = port;
      return std::make_unique<FiggTestBroker>(options);
    };
    polybus::testing::register_test_broker(
        {quirks ? "figg-quirks" : "figg", "figg", [on_port] { return on_port(0); }, on_port});
  }
}

}  // namespace polybus::figg::testing
