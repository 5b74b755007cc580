// SPDX-License-Identifier: Apache-2.0
// The fault proxy: one strand carries every connection. Each connection has two pumps, one per
// direction; a pump reads what its sender writes into a queue of timed pieces, and forwards the
// queue's head when its time (latency, bandwidth, slicing) has come.
#include "polybus/fault_proxy.hpp"

#include <array>
#include <asio.hpp>
#include <atomic>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <system_error>

#include "polybus/io/io_thread.hpp"

namespace polybus::testing {

namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::tcp;

constexpr std::size_t kReadSize = 16 * 1024;

int index_of(Direction d) {
  return d == Direction::to_upstream ? 0 : 1;
}

struct AtomicFlow {
  std::atomic<std::uint64_t> read{0}, forwarded{0}, discarded{0};
  FaultProxyCounters::Flow load() const {
    return {read.load(), forwarded.load(), discarded.load()};
  }
};

// Closes with RST rather than FIN: what a crashed peer or a middlebox's reset looks like.
void reset_socket(tcp::socket& socket) {
  std::error_code ignored;
  if (!socket.is_open()) return;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
}

}  // namespace

class Connection;

class FaultProxy::Impl : public std::enable_shared_from_this<FaultProxy::Impl> {
 public:
  explicit Impl(FaultProxyOptions options)
      : options_(std::move(options)),
        own_thread_(options_.io_context ? nullptr : std::make_unique<IoThread>()),
        io_(options_.io_context ? *options_.io_context : own_thread_->context()),
        strand_(asio::make_strand(io_)),
        acceptor_(strand_),
        rng_(options_.seed) {}

  void open();
  void accept();
  void stop();
  // Runs `fn` on the strand and waits for it; directly when already there.
  template <typename Fn>
  void on_strand(Fn fn) {
    if (strand_.running_in_this_thread()) return fn();
    std::packaged_task<void()> task(std::move(fn));
    auto done = task.get_future();
    asio::post(strand_, [&task] { task(); });
    done.get();
  }

  Faults faults(Direction d) const {
    std::lock_guard<std::mutex> lock(faults_mutex_);
    return faults_[index_of(d)];
  }
  std::uint64_t generation(Direction d) const {
    std::lock_guard<std::mutex> lock(faults_mutex_);
    return generation_[index_of(d)];
  }
  void set_faults(Direction d, const Faults& f);
  void for_each_connection(void (Connection::*action)(Direction), Direction d);
  void reset_connections();
  void forget(const std::shared_ptr<Connection>& c) { connections_.erase(c); }
  Clock::duration jitter(std::chrono::milliseconds bound) {
    if (bound.count() <= 0) return {};
    std::uniform_int_distribution<std::int64_t> pick(0, bound.count() * 1000);
    return std::chrono::microseconds(pick(rng_));
  }

  FaultProxyOptions options_;
  std::unique_ptr<IoThread> own_thread_;
  asio::io_context& io_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::acceptor acceptor_;
  tcp::endpoint upstream_;
  std::uint16_t port_ = 0;
  std::mt19937_64 rng_;                                // strand
  std::set<std::shared_ptr<Connection>> connections_;  // strand
  Clock::time_point refuse_until_{};                   // strand
  bool stopped_ = false;                               // strand

  mutable std::mutex faults_mutex_;
  Faults faults_[2];
  std::uint64_t generation_[2] = {0, 0};

  AtomicFlow flows_[2];
  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, active_{0}, resets_{0},
      upstream_failures_{0};
};

using Impl = FaultProxy::Impl;

// One direction of one connection.
class Pump {
 public:
  Pump(Connection& connection, Direction direction, tcp::socket& from, tcp::socket& to,
       asio::strand<asio::io_context::executor_type>& strand)
      : connection_(connection), direction_(direction), from_(from), to_(to), timer_(strand) {}

  void start() { read(); }
  bool finished() const { return finished_; }
  void kick() {
    // A change of faults: a pump waiting for a piece's time looks again, and one held by a
    // blackhole goes on.
    if (waiting_) {
      timer_.cancel();
      return;
    }
    write();
    finish_if_drained();
  }
  void close_receiver();
  void stop() {
    finished_ = true;
    drop_queued();
    timer_.cancel();
  }

 private:
  struct Piece {
    std::string bytes;
    std::size_t sent = 0;
    Clock::time_point due;
  };

  void read();
  void on_read(std::error_code ec, std::size_t n);
  void write();
  void on_written(std::error_code ec, std::size_t n);
  void finish_if_drained();
  void drop_queued();
  AtomicFlow& flow();

  Connection& connection_;
  Direction direction_;
  tcp::socket& from_;
  tcp::socket& to_;
  asio::steady_timer timer_;
  std::array<char, kReadSize> buffer_{};
  std::deque<Piece> queue_;
  std::size_t queued_ = 0;
  Clock::time_point last_due_{};
  Clock::time_point next_send_{};
  std::uint64_t generation_seen_ = 0;
  std::uint64_t forwarded_since_faults_ = 0;
  bool reading_ = false, writing_ = false, waiting_ = false;
  bool sender_done_ = false;      // EOF read
  bool sender_reset_ = false;     // a reset read while blackholed, passed on when it lifts
  bool receiver_closed_ = false;  // close_one_side: nothing more this way
  bool finished_ = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(Impl& proxy, tcp::socket client)
      : proxy_(proxy.shared_from_this()),
        client_(std::move(client)),
        upstream_(proxy.strand_),
        pumps_{Pump(*this, Direction::to_upstream, client_, upstream_, proxy.strand_),
               Pump(*this, Direction::to_client, upstream_, client_, proxy.strand_)} {}

  void start() {
    auto self = shared_from_this();
    upstream_.async_connect(proxy_->upstream_, [self](std::error_code ec) {
      if (self->closed_) return;
      if (ec) {
        ++self->proxy_->upstream_failures_;
        self->reset(false);
        return;
      }
      std::error_code ignored;
      self->upstream_.set_option(tcp::no_delay(true), ignored);
      self->pumps_[0].start();
      self->pumps_[1].start();
    });
  }

  Impl& proxy() { return *proxy_; }
  std::shared_ptr<Connection> self() { return shared_from_this(); }
  bool closed() const { return closed_; }

  // RST to both sides, now.
  void reset(bool injected) {
    if (closed_) return;
    if (injected) ++proxy_->resets_;
    reset_socket(client_);
    reset_socket(upstream_);
    end();
  }
  // Both pumps are done (each side closed its way): close both sockets.
  void on_pump_finished() {
    if (closed_ || !pumps_[0].finished() || !pumps_[1].finished()) return;
    std::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    end();
  }
  void kick(Direction) {
    for (auto& p : pumps_) p.kick();
  }
  void close_one_side(Direction d) { pumps_[index_of(d)].close_receiver(); }
  void reset_now(Direction) { reset(true); }
  void close_quietly(Direction) {
    std::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    end();
  }

 private:
  void end() {
    if (closed_) return;
    closed_ = true;
    for (auto& p : pumps_) p.stop();
    --proxy_->active_;
    proxy_->forget(shared_from_this());
  }

  std::shared_ptr<Impl> proxy_;
  tcp::socket client_;
  tcp::socket upstream_;
  Pump pumps_[2];
  bool closed_ = false;
};

AtomicFlow& Pump::flow() {
  return connection_.proxy().flows_[index_of(direction_)];
}

void Pump::read() {
  if (reading_ || sender_done_ || finished_) return;
  if (queued_ >= connection_.proxy().options_.max_buffered_bytes) return;  // write() resumes
  reading_ = true;
  from_.async_read_some(
      asio::buffer(buffer_),
      [self = connection_.self(), this](std::error_code ec, std::size_t n) { on_read(ec, n); });
}

void Pump::on_read(std::error_code ec, std::size_t n) {
  reading_ = false;
  if (connection_.closed()) return;
  auto& proxy = connection_.proxy();
  const Faults faults = proxy.faults(direction_);
  if (ec) {
    if (receiver_closed_) {
      finished_ = true;
      drop_queued();
      connection_.on_pump_finished();
      return;
    }
    sender_done_ = true;
    // A reset (or an error) travels on as a reset, after what came before it; a blackhole holds
    // it with the bytes.
    if (ec != asio::error::eof) sender_reset_ = true;
    if (sender_reset_ && !faults.blackhole) return connection_.reset(false);
    finish_if_drained();
    return;
  }
  flow().read += n;
  if (receiver_closed_) {
    flow().discarded += n;
  } else {
    Piece piece;
    piece.bytes.assign(buffer_.data(), n);
    piece.due = Clock::now() + faults.latency + proxy.jitter(faults.jitter);
    if (piece.due < last_due_) piece.due = last_due_;  // jitter never reorders
    last_due_ = piece.due;
    queued_ += n;
    queue_.push_back(std::move(piece));
    write();
  }
  read();
}

void Pump::write() {
  if (writing_ || waiting_ || finished_ || receiver_closed_ || queue_.empty()) return;
  auto& proxy = connection_.proxy();
  const Faults faults = proxy.faults(direction_);
  if (faults.blackhole) return;  // held until the faults change (kick)
  const std::uint64_t generation = proxy.generation(direction_);
  if (generation != generation_seen_) {
    generation_seen_ = generation;
    forwarded_since_faults_ = 0;
  }
  const auto now = Clock::now();
  auto when = std::max(queue_.front().due, next_send_);
  if (when > now) {
    waiting_ = true;
    timer_.expires_at(when);
    timer_.async_wait([self = connection_.self(), this](std::error_code) {
      waiting_ = false;
      if (!connection_.closed()) write();
    });
    return;
  }
  Piece& piece = queue_.front();
  std::size_t n = piece.bytes.size() - piece.sent;
  if (faults.slice_bytes > 0) n = std::min(n, faults.slice_bytes);
  // A limited link sends in pieces of about 10 ms, so that the rate holds within a read.
  if (faults.bytes_per_second > 0)
    n = std::min<std::size_t>(n, std::max<std::uint64_t>(1, faults.bytes_per_second / 100));
  if (faults.reset_after_bytes > 0) {
    const auto left =
        faults.reset_after_bytes - std::min(faults.reset_after_bytes, forwarded_since_faults_);
    if (left == 0) {
      connection_.reset(true);
      return;
    }
    n = static_cast<std::size_t>(std::min<std::uint64_t>(n, left));
  }
  writing_ = true;
  asio::async_write(to_, asio::buffer(piece.bytes.data() + piece.sent, n),
                    [self = connection_.self(), this](std::error_code ec, std::size_t written) {
                      on_written(ec, written);
                    });
}

void Pump::on_written(std::error_code ec, std::size_t n) {
  writing_ = false;
  if (connection_.closed() || finished_) return;
  if (receiver_closed_) {
    drop_queued();  // the piece kept for this write, too
    return;
  }
  if (ec) {
    connection_.reset(false);
    return;
  }
  flow().forwarded += n;
  forwarded_since_faults_ += n;
  queued_ -= n;
  Piece& piece = queue_.front();
  piece.sent += n;
  if (piece.sent == piece.bytes.size()) queue_.pop_front();
  const Faults faults = connection_.proxy().faults(direction_);
  const auto now = Clock::now();
  next_send_ = now;
  if (faults.bytes_per_second > 0)
    next_send_ += std::chrono::nanoseconds(n * 1'000'000'000ull / faults.bytes_per_second);
  if (faults.slice_bytes > 0 && faults.slice_delay.count() > 0)
    next_send_ = std::max(next_send_, now + faults.slice_delay);
  if (faults.reset_after_bytes > 0 && forwarded_since_faults_ >= faults.reset_after_bytes) {
    connection_.reset(true);
    return;
  }
  read();  // it may have stopped at the buffer's bound
  if (queue_.empty())
    finish_if_drained();
  else
    write();
}

void Pump::finish_if_drained() {
  if (!sender_done_ || !queue_.empty() || writing_ || finished_) return;
  if (connection_.proxy().faults(direction_).blackhole) return;  // the close is held too
  if (sender_reset_) return connection_.reset(false);
  // The sender closed its way: the receiver gets the FIN, the other way goes on.
  std::error_code ignored;
  to_.shutdown(tcp::socket::shutdown_send, ignored);
  finished_ = true;
  connection_.on_pump_finished();
}

void Pump::close_receiver() {
  if (finished_ || receiver_closed_) return;
  receiver_closed_ = true;
  drop_queued();
  timer_.cancel();
  std::error_code ignored;
  to_.shutdown(tcp::socket::shutdown_send, ignored);
  // The pump goes on reading (and discarding) so that the sender is not blocked; it finishes
  // when the sender closes.
  read();
}

void Pump::drop_queued() {
  // The piece being written stays until its write completes: asio still reads from it.
  const std::size_t keep = writing_ && !queue_.empty() ? 1 : 0;
  while (queue_.size() > keep) {
    const Piece& last = queue_.back();
    flow().discarded += last.bytes.size() - last.sent;
    queued_ -= last.bytes.size() - last.sent;
    queue_.pop_back();
  }
}

void Impl::open() {
  std::error_code ec;
  const auto listen_address = asio::ip::make_address(options_.listen_host, ec);
  if (ec) throw std::system_error(ec, "fault proxy: listen address '" + options_.listen_host + "'");
  if (!listen_address.is_loopback() && !options_.allow_non_loopback)
    throw std::invalid_argument("fault proxy: listen address " + options_.listen_host +
                                " is not loopback; set allow_non_loopback to listen there");
  tcp::resolver resolver(io_);
  auto found = resolver.resolve(options_.upstream_host, std::to_string(options_.upstream_port), ec);
  if (ec || found.empty())
    throw std::system_error(ec ? ec : std::make_error_code(std::errc::host_unreachable),
                            "fault proxy: upstream '" + options_.upstream_host + ":" +
                                std::to_string(options_.upstream_port) + "'");
  upstream_ = *found.begin();
  const tcp::endpoint at(listen_address, options_.listen_port);
  acceptor_.open(at.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(at, ec);
  if (ec)
    throw std::system_error(ec, "fault proxy: cannot listen on " + options_.listen_host + ":" +
                                    std::to_string(options_.listen_port));
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  asio::post(strand_, [self = shared_from_this()] { self->accept(); });
}

void Impl::accept() {
  if (stopped_) return;
  // The accepted socket takes the acceptor's executor, our strand, and so does this handler.
  acceptor_.async_accept([self = shared_from_this()](std::error_code ec, tcp::socket socket) {
    if (self->stopped_) return;
    if (!ec) {
      if (Clock::now() < self->refuse_until_) {
        ++self->refused_;
        reset_socket(socket);
      } else {
        std::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto c = std::make_shared<Connection>(*self, std::move(socket));
        self->connections_.insert(c);
        ++self->accepted_;
        ++self->active_;
        c->start();
      }
    }
    if (ec != asio::error::operation_aborted) self->accept();
  });
}

void Impl::set_faults(Direction d, const Faults& f) {
  {
    std::lock_guard<std::mutex> lock(faults_mutex_);
    faults_[index_of(d)] = f;
    ++generation_[index_of(d)];
  }
  asio::post(strand_, [self = shared_from_this(), d] {
    auto copy = self->connections_;
    for (auto& c : copy) c->kick(d);
  });
}

void Impl::for_each_connection(void (Connection::*action)(Direction), Direction d) {
  on_strand([this, action, d] {
    auto copy = connections_;
    for (auto& c : copy) ((*c).*action)(d);
  });
}

void Impl::stop() {
  on_strand([this] {
    if (stopped_) return;
    stopped_ = true;
    std::error_code ignored;
    acceptor_.close(ignored);
    auto copy = connections_;
    for (auto& c : copy) c->close_quietly(Direction::to_upstream);
  });
}

FaultProxy::FaultProxy(FaultProxyOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {
  impl_->open();
}

FaultProxy::~FaultProxy() {
  stop();
  // The own thread ends once nothing of the proxy is left on it.
  if (impl_->own_thread_) impl_->own_thread_->join();
}

std::uint16_t FaultProxy::port() const {
  return impl_->port_;
}
std::string FaultProxy::address() const {
  return impl_->options_.listen_host + ":" + std::to_string(impl_->port_);
}

void FaultProxy::set_faults(Direction direction, const Faults& faults) {
  impl_->set_faults(direction, faults);
}
void FaultProxy::set_faults(const Faults& faults) {
  impl_->set_faults(Direction::to_upstream, faults);
  impl_->set_faults(Direction::to_client, faults);
}
Faults FaultProxy::faults(Direction direction) const {
  return impl_->faults(direction);
}
void FaultProxy::clear_faults() {
  set_faults(Faults{});
}

void FaultProxy::reset_connections() {
  impl_->for_each_connection(&Connection::reset_now, Direction::to_upstream);
}
void FaultProxy::close_one_side(Direction direction) {
  impl_->for_each_connection(&Connection::close_one_side, direction);
}
void FaultProxy::refuse_connections(std::chrono::milliseconds how_long) {
  impl_->on_strand([this, how_long] { impl_->refuse_until_ = Clock::now() + how_long; });
}

FaultProxyCounters FaultProxy::counters() const {
  FaultProxyCounters c;
  c.to_upstream = impl_->flows_[0].load();
  c.to_client = impl_->flows_[1].load();
  c.accepted = impl_->accepted_;
  c.refused = impl_->refused_;
  c.active = impl_->active_;
  c.resets = impl_->resets_;
  c.upstream_failures = impl_->upstream_failures_;
  return c;
}

void FaultProxy::stop() {
  impl_->stop();
}

}  // namespace polybus::testing
