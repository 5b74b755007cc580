// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb/sp.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/metrics/counters_by_name.hpp"
#include "polybus/testing.hpp"

namespace polybus::memodb::testing {

namespace {

std::string worker_id(std::uint32_t n) {
  std::string id(4, '\0');
  for (int i = 0; i < 4; ++i)
    id[static_cast<std::size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
  return id;
}

// The TCP endpoint a generic acceptor is bound to.
asio::ip::tcp::endpoint tcp_endpoint_of(const asio::generic::stream_protocol::endpoint& bound) {
  asio::ip::tcp::endpoint tcp;
  if (bound.size() <= tcp.capacity()) {
    std::memcpy(tcp.data(), bound.data(), bound.size());
    tcp.resize(bound.size());
  }
  return tcp;
}

}  // namespace

// The broker speaks NNG's scalability protocol (SP) itself, over Asio, through the sans-IO SP
// codec (polybus/memodb/sp.hpp): the test broker shares its process with the clients under
// test, and libnng 1.5.2 stalls its process-wide reaper when a TCP pipe is closed while a
// partial read completes (a pipe cut mid-message by a reset; NNG #1636, fixed in 1.6.0), after
// which no NNG socket in the process, the clients' included, sees a pipe go or dials again.
class SpConnection : public std::enable_shared_from_this<SpConnection> {
 public:
  using Socket = asio::generic::stream_protocol::socket;
  struct Events {
    std::function<void(std::uint64_t id)> opened;  // the headers are exchanged
    std::function<void(std::uint64_t id, std::string backtrace, std::string_view body)> request;
    std::function<void(std::uint64_t id)> closed;  // after opened, once
    std::function<void()> stalled;                 // a connection's reading stopped (budget)
    std::uint64_t bytes_received = 0;              // by every connection
    std::uint64_t bytes_sent = 0;
    std::uint64_t held_requests_peak = 0;  // the most any one connection held
    std::uint64_t held_bytes_peak = 0;
  };
  // What one connection may make the broker hold (BrokerOptions::max_held_*).
  struct Budget {
    std::size_t requests;
    std::size_t bytes;
  };

  SpConnection(Socket socket, sp::Carrier carrier, std::uint64_t id, Events* events, Budget budget)
      : socket_(std::move(socket)),
        carrier_(carrier),
        id_(id),
        events_(events),
        budget_(budget),
        decoder_(carrier, kMaxMessage) {}

  std::uint64_t id() const { return id_; }

  void start() {
    send_raw(sp::connection_header(sp::Protocol::rep0));
    asio::async_read(
        socket_, asio::buffer(peer_header_),
        [self = shared_from_this()](std::error_code ec, std::size_t) {
          if (ec || sp::check_connection_header(
                        std::string_view(self->peer_header_, sp::kHeaderSize), sp::Protocol::req0))
            return self->close();
          self->opened_ = true;
          if (self->events_) self->events_->opened(self->id_);
          self->read();
        });
  }

  // As rep0: a reply to a connection that went is dropped.
  void send(std::string_view backtrace, std::string_view header, std::string_view payload) {
    const std::size_t length = backtrace.size() + header.size() + payload.size();
    std::string frame = sp::frame_prefix(carrier_, length);
    frame.reserve(frame.size() + length);
    frame.append(backtrace).append(header).append(payload);
    send_raw(std::move(frame));
  }

  // A request of this connection was answered or dropped: the broker holds it no longer.
  void released(std::size_t bytes) {
    held_requests_ -= std::min<std::size_t>(held_requests_, 1);
    held_bytes_ -= std::min(held_bytes_, bytes);
    resume_when_room();
  }

  // Ends the connection without telling the broker (it is closing everything).
  void close_quietly() {
    events_ = nullptr;
    close();
  }

 private:
  // The real broker takes any size (payloads of many MiB pass); this one stops somewhere.
  static constexpr std::size_t kMaxMessage = std::size_t{1} << 30;

  void read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              if (self->events_) self->events_->bytes_received += n;
                              self->received(std::string_view(self->buffer_, n));
                            });
  }

  void received(std::string_view bytes) {
    while (!closed_) {
      if (held_requests_ >= budget_.requests || held_bytes_ >= budget_.bytes) {
        // Over budget: the rest of this read waits, and no read is started, until half of what
        // the connection holds is gone. The peer's writes then wait in TCP.
        unread_ = bytes;
        stalled_ = true;
        if (events_ && events_->stalled) events_->stalled();
        return;
      }
      std::error_code ec;
      bytes.remove_prefix(decoder_.feed(bytes, ec));
      if (ec) return close();
      if (!decoder_.ready()) break;
      const std::string message = decoder_.take();
      std::string_view backtrace, body;
      bool too_many_hops = false;
      if (sp::split_request(message, backtrace, body, too_many_hops))
        return close();             // no request ID: rep0 closes on such a peer
      if (too_many_hops) continue;  // dropped without a word, as rep0 does
      hold(message.size());
      if (events_) events_->request(id_, std::string(backtrace), body);
    }
    if (!closed_) read();
  }

  void hold(std::size_t bytes) {
    ++held_requests_;
    held_bytes_ += bytes;
    if (!events_) return;
    events_->held_requests_peak =
        std::max<std::uint64_t>(events_->held_requests_peak, held_requests_);
    events_->held_bytes_peak = std::max<std::uint64_t>(events_->held_bytes_peak, held_bytes_);
  }

  // Posted: the caller may be the broker in the middle of another connection's request.
  void resume_when_room() {
    if (!stalled_ || closed_ || held_requests_ > budget_.requests / 2 ||
        held_bytes_ > budget_.bytes / 2)
      return;
    stalled_ = false;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      const std::string_view rest = self->unread_;
      self->unread_ = {};
      self->received(rest);
    });
  }

  void send_raw(std::string bytes) {
    if (closed_) return;
    held_bytes_ += bytes.size();
    if (events_)
      events_->held_bytes_peak = std::max<std::uint64_t>(events_->held_bytes_peak, held_bytes_);
    writes_.push_back(std::move(bytes));
    if (writes_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](std::error_code ec, std::size_t n) {
                        if (ec) return self->close();
                        if (self->events_) self->events_->bytes_sent += n;
                        self->held_bytes_ -=
                            std::min(self->held_bytes_, self->writes_.front().size());
                        self->writes_.pop_front();
                        self->resume_when_room();
                        if (!self->writes_.empty() && !self->closed_) self->write_next();
                      });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    if (opened_ && events_) events_->closed(id_);
  }

  Socket socket_;
  const sp::Carrier carrier_;
  const std::uint64_t id_;
  Events* events_;
  const Budget budget_;
  char peer_header_[sp::kHeaderSize] = {};
  char buffer_[64 * 1024];
  sp::FrameDecoder decoder_;
  std::deque<std::string> writes_;
  // Held for this connection: its requests not yet answered, their bytes and the bytes of the
  // answers not yet written.
  std::size_t held_requests_ = 0;
  std::size_t held_bytes_ = 0;
  bool stalled_ = false;
  std::string_view unread_;  // in buffer_: the rest of the read that stalled
  bool opened_ = false;
  bool closed_ = false;
};

class BrokerImpl {
 public:
  explicit BrokerImpl(BrokerOptions options) : options_(std::move(options)) {
    url_ = options_.url.empty() ? "tcp://127.0.0.1:0" : options_.url;
    events_.opened = [this](std::uint64_t) { connection_count(+1); };
    events_.closed = [this](std::uint64_t id) {
      connections_.erase(id);
      connection_count(-1);
    };
    events_.stalled = [this] {
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.read_stalls;
      }
      publish_stats();
    };
    events_.request = [this](std::uint64_t connection, std::string backtrace,
                             std::string_view body) {
      const std::uint64_t key = ++next_key_;
      const std::size_t bytes = backtrace.size() + body.size();
      requests_[key] = Request{connection, std::move(backtrace), bytes};
      handle(key, body);
      publish_stats();
    };
    auto ok = run([this] { return listen(); });
    if (!ok.empty()) {
      io_.stop_and_join();
      throw std::runtime_error("memodb test broker: " + ok);
    }
  }
  ~BrokerImpl() {
    run([this] { close_all(); });
    io_.stop_and_join();
  }

  template <typename Fn>
  auto run(Fn fn) -> decltype(fn()) {
    return io_.run(std::move(fn));
  }

  // ---- control (io thread) ----
  std::string listen();
  void close_all();
  void close_keeping_port();  // stop(): close_all(), and keep the TCP port for start()

  std::string url() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return url_;
  }
  BrokerStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }
  bool wait_until(const std::function<bool(const BrokerStats&)>& condition,
                  std::chrono::milliseconds bound) const {
    std::unique_lock<std::mutex> lock(stats_mutex_);
    return stats_cv_.wait_for(lock, bound, [&] { return condition(stats_); });
  }
  metrics::BrokerMetrics metrics() const;  // io thread

 private:
  // A request waiting for the broker's answer: where it came from and its backtrace.
  struct Request {
    std::uint64_t connection = 0;
    std::string backtrace;
    std::size_t bytes = 0;  // as its connection counted it
  };

  struct Worker {
    std::string id;
    std::vector<std::string> services;
    enum class State { waiting, busy, heartbeat } state = State::waiting;
    std::uint64_t held = 0;       // its request the broker holds (waiting)
    std::uint64_t client = 0;     // the client's request (busy)
    std::string job_service;      // the service of that job
    std::uint64_t since = 0;      // when it started waiting, for first-come dispatch
    std::uint64_t timer_gen = 0;  // tells a stale timer from the current one
    std::unique_ptr<asio::steady_timer> timer;
    bool in_idle_index = false;  // in idle_by_service_, under `since`
  };

  struct Job {
    std::uint64_t client = 0;
    std::string service;
    std::uint64_t timeout_ms = 0;
    std::string payload;
    std::unique_ptr<asio::steady_timer> timer;
  };

  void accept();
  void connection_count(int change);
  void reply(std::uint64_t key, const std::string& header, std::string_view payload = {});
  void drop(std::uint64_t key);
  void handle(std::uint64_t key, std::string_view message);

  void waiting(Worker& w);
  // Moves a worker out of (and with waiting, into) the index of idle workers per service.
  void set_state(Worker& w, Worker::State state);
  void unindex_idle(Worker& w);
  // Out of the queue and its index.
  Job take_job(std::map<std::uint64_t, Job>::iterator job);
  void dispatch(Worker& w, std::map<std::uint64_t, Job>::iterator job);
  void forget(const std::string& id);
  void disconnect(std::uint64_t key, std::string_view id);
  void arm(Worker& w, std::chrono::milliseconds after, void (BrokerImpl::*fn)(const std::string&));
  void heartbeat_due(const std::string& id);
  void worker_timed_out(const std::string& id);
  void publish_stats();

  // Io thread: the idle workers of each service by when they began waiting, and the queued jobs
  // of each service by arrival, so that a job or a READY finds its match without looking at
  // every worker or job (10,000 services on one broker).
  std::map<std::string, std::set<std::pair<std::uint64_t, std::string>>> idle_by_service_;
  std::map<std::string, std::set<std::uint64_t>> queued_by_service_;
  std::uint64_t idle_count_ = 0;

  BrokerOptions options_;
  IoThread io_;  // before everything that uses its io_context: destroyed after them

  // io thread only:
  std::unique_ptr<asio::basic_socket_acceptor<asio::generic::stream_protocol>> acceptor_;
  PortHold port_hold_{io_.context()};  // a TCP port, while stopped
  bool ipc_ = false;
  std::string ipc_path_;
  SpConnection::Events events_;
  std::map<std::uint64_t, std::shared_ptr<SpConnection>> connections_;
  std::map<std::uint64_t, Request> requests_;
  bool running_ = false;
  std::uint64_t next_key_ = 0;
  std::uint64_t next_connection_ = 0;
  std::map<std::string, Worker> workers_;
  std::map<std::uint64_t, Job> jobs_;  // queued, oldest first
  // Per service (a name clients choose, so bounded), for metrics.
  struct ServiceCounters {
    std::uint64_t jobs = 0;
    std::uint64_t dispatched = 0;
    std::uint64_t results = 0;
  };
  CountersByName<ServiceCounters> services_;
  std::uint64_t next_seq_ = 0;
  std::uint32_t next_id_ = 0;
  std::mt19937 random_{std::random_device{}()};

  // Shared with callers:
  mutable std::mutex stats_mutex_;
  mutable std::condition_variable stats_cv_;
  BrokerStats stats_;
  std::string url_;
};

std::string BrokerImpl::listen() {
  using Generic = asio::generic::stream_protocol;
  std::string address = url();
  std::error_code ec;
  auto acceptor = std::make_unique<asio::basic_socket_acceptor<Generic>>(io_.context());
  if (address.rfind("ipc://", 0) == 0) {
    ipc_ = true;
    ipc_path_ = address.substr(6);
    ::unlink(ipc_path_.c_str());  // a stale socket file from an earlier run
    const asio::local::stream_protocol::endpoint endpoint(ipc_path_);
    acceptor->open(Generic(endpoint.protocol()), ec);
    if (!ec) acceptor->bind(Generic::endpoint(endpoint), ec);
  } else if (address.rfind("tcp://", 0) == 0) {
    ipc_ = false;
    const std::string host_port = address.substr(6);
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos) return "no port in " + address;
    std::string host = host_port.substr(0, colon);
    if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
    const auto ip = asio::ip::make_address(host, ec);
    if (ec) return "cannot listen on " + address + ": the host must be an IP address";
    std::uint16_t port = 0;
    try {
      port = static_cast<std::uint16_t>(std::stoul(host_port.substr(colon + 1)));
    } catch (const std::exception&) {
      return "bad port in " + address;
    }
    const asio::ip::tcp::endpoint endpoint(ip, port);
    acceptor->open(Generic(endpoint.protocol()), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(Generic::endpoint(endpoint), ec);
    if (!ec && port == 0) {
      const Generic::endpoint bound = acceptor->local_endpoint(ec);
      const auto tcp = ec ? asio::ip::tcp::endpoint() : tcp_endpoint_of(bound);
      std::lock_guard<std::mutex> lock(stats_mutex_);
      url_ = "tcp://" + host_port.substr(0, colon) + ":" + std::to_string(tcp.port());
    }
  } else {
    return "cannot listen on " + address + ": tcp:// or ipc:// only";
  }
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + address + ": " + ec.message();
  port_hold_.release();
  acceptor_ = std::move(acceptor);
  running_ = true;
  // A restarted broker hands out IDs from a new range.
  next_id_ = static_cast<std::uint32_t>(random_());
  accept();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.starts;
  }
  publish_stats();
  return {};
}

void BrokerImpl::accept() {
  acceptor_->async_accept([this, acceptor = acceptor_.get()](
                              std::error_code ec, asio::generic::stream_protocol::socket socket) {
    if (!running_ || acceptor != acceptor_.get()) return;  // closed, or an earlier listener's
    if (!ec) {
      // Replies are small and go one at a time: Nagle's algorithm would hold each for the
      // client's delayed ACK.
      if (!ipc_) socket.set_option(asio::ip::tcp::no_delay(true), ec);
      auto connection = std::make_shared<SpConnection>(
          std::move(socket), ipc_ ? sp::Carrier::ipc : sp::Carrier::tcp, ++next_connection_,
          &events_, SpConnection::Budget{options_.max_held_requests, options_.max_held_bytes});
      connections_[connection->id()] = connection;
      connection->start();
    }
    accept();
  });
}

void BrokerImpl::connection_count(int change) {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    auto& n = stats_.connections;
    if (change > 0)
      ++n;
    else if (n > 0)
      --n;
  }
  publish_stats();
}

void BrokerImpl::close_keeping_port() {
  std::error_code ec;
  const auto bound = running_ && !ipc_ ? acceptor_->local_endpoint(ec)
                                       : asio::generic::stream_protocol::endpoint();
  const bool tcp = running_ && !ipc_ && !ec;
  close_all();
  if (tcp) port_hold_.hold(tcp_endpoint_of(bound));  // until start() listens again
}

void BrokerImpl::close_all() {
  if (!running_) return;
  running_ = false;
  std::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  acceptor_.reset();  // its pending accept completes with operation_aborted and finds nothing
  if (ipc_) ::unlink(ipc_path_.c_str());
  auto connections = std::move(connections_);
  connections_.clear();
  for (auto& [id, connection] : connections) connection->close_quietly();
  requests_.clear();
  workers_.clear();
  idle_by_service_.clear();
  queued_by_service_.clear();
  idle_count_ = 0;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.workers_by_service.clear();
  }
  jobs_.clear();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.connections = 0;
  }
  publish_stats();
}

void BrokerImpl::reply(std::uint64_t key, const std::string& header, std::string_view payload) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return;
  Request request = std::move(it->second);
  requests_.erase(it);
  if (auto c = connections_.find(request.connection); c != connections_.end()) {
    c->second->send(request.backtrace, header, payload);
    c->second->released(request.bytes);
  }
}

void BrokerImpl::drop(std::uint64_t key) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return;
  const Request request = std::move(it->second);
  requests_.erase(it);
  if (auto c = connections_.find(request.connection); c != connections_.end())
    c->second->released(request.bytes);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  ++stats_.dropped;
}

void BrokerImpl::disconnect(std::uint64_t key, std::string_view id) {
  std::string header;
  if (append_disconnect(header, id)) return drop(key);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.disconnects;
  }
  reply(key, header);
}

void BrokerImpl::handle(std::uint64_t key, std::string_view message) {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.received;
  }
  Header header;
  std::string_view payload;
  if (decode(message, header, payload)) {
    // The real broker crashes on some of these and drops the rest (a READY with unsorted names,
    // for one) without a reply. This one drops them all and goes on.
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.malformed;
    }
    return drop(key);
  }
  switch (header.type) {
    case MessageType::ready: {
      if (header.services.empty()) return drop(key);
      std::string id;
      do id = worker_id(next_id_++);
      while (workers_.count(id));
      Worker& w = workers_[id];
      w.id = id;
      w.services.assign(header.services.begin(), header.services.end());
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        for (const auto& service : w.services) ++stats_.workers_by_service[service];
      }
      w.held = key;
      w.timer = std::make_unique<asio::steady_timer>(io_.context());
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.registrations;
      }
      return waiting(w);
    }
    case MessageType::job: {
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.jobs;
      }
      const std::uint64_t seq = ++next_seq_;
      Job& job = jobs_[seq];
      job.client = key;
      job.service = std::string(header.service);
      ++services_[job.service].jobs;
      job.timeout_ms = header.timeout_ms;
      job.payload = std::string(payload);
      queued_by_service_[job.service].insert(seq);
      // The longest-waiting idle worker that offers the service takes it.
      if (auto idle = idle_by_service_.find(job.service);
          idle != idle_by_service_.end() && !idle->second.empty())
        return dispatch(workers_.at(idle->second.begin()->second), jobs_.find(seq));
      job.timer = std::make_unique<asio::steady_timer>(io_.context(), options_.queue_timeout);
      job.timer->async_wait([this, seq](std::error_code ec) {
        if (ec) return;
        auto it = jobs_.find(seq);
        if (it == jobs_.end()) return;
        const std::uint64_t client = take_job(it).client;
        {
          std::lock_guard<std::mutex> lock(stats_mutex_);
          ++stats_.queue_expired;
        }
        drop(client);
        publish_stats();
      });
      return;
    }
    case MessageType::result: {
      auto it = workers_.find(std::string(header.id));
      if (it == workers_.end()) return disconnect(key, header.id);
      Worker& w = it->second;
      if (w.state != Worker::State::busy) {
        forget(w.id);  // out of sync
        return disconnect(key, header.id);
      }
      std::string out;
      (void)append_result(out, {});
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.results;
      }
      ++services_[w.job_service].results;
      reply(w.client, out, payload);  // the disconnecting flag is not passed on
      w.client = 0;
      if (header.disconnecting.value_or(false)) {
        forget(w.id);
        return disconnect(key, header.id);
      }
      w.held = key;
      return waiting(w);
    }
    case MessageType::heartbeat: {
      auto it = workers_.find(std::string(header.id));
      if (it == workers_.end()) return disconnect(key, header.id);
      Worker& w = it->second;
      if (w.state != Worker::State::heartbeat) {
        forget(w.id);
        return disconnect(key, header.id);
      }
      w.held = key;
      return waiting(w);
    }
    case MessageType::disconnect:
      return drop(key);
  }
}

void BrokerImpl::waiting(Worker& w) {
  unindex_idle(w);
  w.since = ++next_seq_;
  // The oldest job queued for any of its services.
  std::optional<std::uint64_t> oldest;
  for (const auto& service : w.services)
    if (auto queued = queued_by_service_.find(service);
        queued != queued_by_service_.end() && !queued->second.empty() &&
        (!oldest || *queued->second.begin() < *oldest))
      oldest = *queued->second.begin();
  set_state(w, Worker::State::waiting);
  if (oldest) return dispatch(w, jobs_.find(*oldest));
  arm(w, options_.heartbeat_interval, &BrokerImpl::heartbeat_due);
}

void BrokerImpl::unindex_idle(Worker& w) {
  if (!w.in_idle_index) return;
  for (const auto& service : w.services) {
    auto idle = idle_by_service_.find(service);
    if (idle == idle_by_service_.end()) continue;
    idle->second.erase({w.since, w.id});
    if (idle->second.empty()) idle_by_service_.erase(idle);
  }
  w.in_idle_index = false;
  --idle_count_;
}

void BrokerImpl::set_state(Worker& w, Worker::State state) {
  unindex_idle(w);
  w.state = state;
  if (state != Worker::State::waiting) return;
  for (const auto& service : w.services) idle_by_service_[service].insert({w.since, w.id});
  w.in_idle_index = true;
  ++idle_count_;
}

BrokerImpl::Job BrokerImpl::take_job(std::map<std::uint64_t, Job>::iterator it) {
  if (auto queued = queued_by_service_.find(it->second.service);
      queued != queued_by_service_.end()) {
    queued->second.erase(it->first);
    if (queued->second.empty()) queued_by_service_.erase(queued);
  }
  Job job = std::move(it->second);
  jobs_.erase(it);
  return job;
}

void BrokerImpl::dispatch(Worker& w, std::map<std::uint64_t, Job>::iterator it) {
  Job job = take_job(it);
  std::string header;
  (void)append_job(header, w.id, job.service, job.timeout_ms);
  set_state(w, Worker::State::busy);
  w.client = job.client;
  w.job_service = job.service;
  ++services_[job.service].dispatched;
  const std::uint64_t held = w.held;
  w.held = 0;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.dispatched;
  }
  reply(held, header, job.payload);
  arm(w, std::chrono::milliseconds(std::min<std::uint64_t>(job.timeout_ms, 24ull * 3'600'000)),
      &BrokerImpl::worker_timed_out);
}

void BrokerImpl::arm(Worker& w, std::chrono::milliseconds after,
                     void (BrokerImpl::*fn)(const std::string&)) {
  const std::uint64_t gen = ++w.timer_gen;
  w.timer->expires_after(after);
  w.timer->async_wait([this, id = w.id, gen, fn](std::error_code ec) {
    if (ec) return;
    auto it = workers_.find(id);
    if (it == workers_.end() || it->second.timer_gen != gen) return;
    (this->*fn)(id);
    publish_stats();
  });
}

void BrokerImpl::heartbeat_due(const std::string& id) {
  Worker& w = workers_.at(id);
  std::string header;
  (void)append_heartbeat(header, w.id);
  set_state(w, Worker::State::heartbeat);
  const std::uint64_t held = w.held;
  w.held = 0;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.heartbeats;
  }
  reply(held, header);
  arm(w, options_.heartbeat_timeout, &BrokerImpl::worker_timed_out);
}

void BrokerImpl::worker_timed_out(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.workers_expired;
  }
  forget(id);
}

void BrokerImpl::forget(const std::string& id) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  unindex_idle(it->second);
  Worker w = std::move(it->second);
  workers_.erase(it);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    auto& counts = stats_.workers_by_service;
    for (const auto& service : w.services)
      if (auto counted = counts.find(service); counted != counts.end() && --counted->second == 0)
        counts.erase(counted);
  }
  if (w.timer) w.timer->cancel();
  // Whatever it held is dropped without a word: a waiting request, or its client's job.
  if (w.held) drop(w.held);
  if (w.client) drop(w.client);
}

void BrokerImpl::publish_stats() {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.workers = workers_.size();
    stats_.idle = idle_count_;
    // workers_by_service is kept as workers come and go (a worker registers again after every
    // job): counting it over every worker for every event was most of a 2,000-worker broker's
    // time.
    stats_.queued = jobs_.size();
    stats_.held_requests_peak = events_.held_requests_peak;
    stats_.held_bytes_peak = events_.held_bytes_peak;
  }
  stats_cv_.notify_all();
}

metrics::BrokerMetrics BrokerImpl::metrics() const {
  metrics::BrokerMetrics m;
  m.scheme = ipc_ ? "memodb+ipc" : "memodb+tcp";
  m.running = running_;
  m.connections = connections_.size();
  m.connections_accepted = next_connection_;
  m.bytes_received = events_.bytes_received;
  m.bytes_sent = events_.bytes_sent;
  // A service's jobs are its topic's messages, its workers the consumers (group "").
  std::map<std::string, metrics::BrokerQueueMetrics> queues;
  for (const auto& [name, counted] : services_.all()) {
    m.topics.push_back({name, counted.jobs, 0});
    auto& q = queues[name];
    q.delivered = counted.dispatched;
    q.acked = counted.results;
  }
  for (const auto& [seq, job] : jobs_) ++queues[job.service].queued;
  for (const auto& [id, w] : workers_) {
    for (const auto& service : w.services) ++queues[service].consumers;
    if (w.state == Worker::State::busy) ++queues[w.job_service].in_flight;
  }
  for (auto& [name, q] : queues) {
    q.topic = name;
    m.queues.push_back(std::move(q));
  }
  return m;
}

// ---- Broker ----

std::unique_ptr<Broker> Broker::launch(BrokerOptions options) {
  return std::make_unique<Broker>(std::make_unique<BrokerImpl>(std::move(options)));
}
Broker::Broker(std::unique_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() = default;
std::string Broker::url() const {
  return impl_->url();
}
void Broker::stop() {
  impl_->run([this] {
    impl_->close_keeping_port();
    return 0;
  });
}
void Broker::start() {
  auto error = impl_->run([this] { return impl_->listen(); });
  if (!error.empty()) throw std::runtime_error("memodb test broker: " + error);
}
BrokerStats Broker::stats() const {
  return impl_->stats();
}
metrics::BrokerMetrics Broker::metrics() const {
  return impl_->run([this] { return impl_->metrics(); });
}
bool Broker::wait_until(const std::function<bool(const BrokerStats&)>& condition,
                        std::chrono::milliseconds bound) const {
  return impl_->wait_until(condition, bound);
}

// ---- registration with polybus::testing ----

namespace {

// Fast broker timings, and the same numbers in the client's options so its resend times match.
BrokerOptions fast_options(std::string url) {
  BrokerOptions options;
  options.url = std::move(url);
  options.heartbeat_interval = std::chrono::milliseconds(2000);
  options.heartbeat_timeout = std::chrono::milliseconds(2000);
  options.queue_timeout = std::chrono::milliseconds(5000);
  return options;
}

const char* const kFastQuery =
    "?heartbeat_interval=2s&heartbeat_timeout=2s&queue_timeout=5s"
    "&reconnect_initial=10ms&reconnect_max=200ms";

class MemoDbTestBroker : public polybus::testing::TestBroker {
 public:
  explicit MemoDbTestBroker(std::string url)
      : broker_(Broker::launch(fast_options(std::move(url)))) {}
  std::string url() const override { return "memodb+" + broker_->url() + kFastQuery; }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  bool answers_ping() const override { return false; }  // memo01 has no ping
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }

 private:
  std::unique_ptr<Broker> broker_;
};

std::string temp_ipc_url() {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::string base = dir && *dir ? dir : "/tmp";
  return "ipc://" + base + "/polybus-memodb-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter) + ".ipc";
}

}  // namespace

void register_test_brokers() {
  polybus::testing::register_test_broker(
      {"memodb+tcp", "memodb+tcp", [] { return std::make_unique<MemoDbTestBroker>(std::string()); },
       [](std::uint16_t port) {
         return std::make_unique<MemoDbTestBroker>("tcp://127.0.0.1:" + std::to_string(port));
       }});
  polybus::testing::register_test_broker(
      {"memodb+ipc", "memodb+ipc",
       [] { return std::make_unique<MemoDbTestBroker>(temp_ipc_url()); }});
}

}  // namespace polybus::memodb::testing
