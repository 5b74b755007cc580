#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

#include "nng_util.hpp"
#include "polybus/adapter/io_thread.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::memodb::testing {

using memodb::detail::MsgPtr;

namespace {

// Contexts kept waiting for the next request; each request received takes one, which holds
// the request until the broker answers or drops it.
constexpr std::size_t kReceivers = 8;

std::string worker_id(std::uint32_t n) {
  std::string id(4, '\0');
  for (int i = 0; i < 4; ++i) id[static_cast<std::size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
  return id;
}

}  // namespace

class BrokerImpl {
 public:
  explicit BrokerImpl(BrokerOptions options) : options_(std::move(options)) {
    url_ = options_.url.empty() ? "tcp://127.0.0.1:0" : options_.url;
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

 private:
  // Where NNG's callbacks post, one per socket: shut when the socket closes, so a callback that
  // runs later (NNG 1.5.2 can take long to close) posts nothing.
  struct Gate {
    explicit Gate(BrokerImpl* b) : broker(b) {}
    std::mutex mutex;
    bool open = true;
    BrokerImpl* const broker;
  };

  // One rep0 context and its aio. gate and key never change: NNG's threads read them.
  struct Ctx {
    Ctx(std::shared_ptr<Gate> g, std::uint64_t k) : gate(std::move(g)), key(k) {}
    ~Ctx() {
      if (open) nng_ctx_close(ctx);
      if (aio) nng_aio_free(aio);
    }
    const std::shared_ptr<Gate> gate;
    const std::uint64_t key;
    nng_aio* aio = nullptr;
    nng_ctx ctx = NNG_CTX_INITIALIZER;
    bool open = false;
    enum class State { receiving, holding, sending } state = State::receiving;
  };

  struct Worker {
    std::string id;
    std::vector<std::string> services;
    enum class State { waiting, busy, heartbeat } state = State::waiting;
    std::uint64_t held = 0;        // the context holding its request (waiting)
    std::uint64_t client = 0;      // the client's context (busy)
    std::uint64_t since = 0;       // when it started waiting, for first-come dispatch
    std::uint64_t timer_gen = 0;   // tells a stale timer from the current one
    std::unique_ptr<asio::steady_timer> timer;
  };

  struct Job {
    std::uint64_t client = 0;
    std::string service;
    std::uint64_t timeout_ms = 0;
    std::string payload;
    std::unique_ptr<asio::steady_timer> timer;
  };

  static void on_pipe(nng_pipe pipe, nng_pipe_ev event, void* arg) {
    auto* gate = static_cast<Gate*>(arg);
    const std::uint32_t socket = nng_pipe_socket(pipe).id;
    std::lock_guard<std::mutex> gate_lock(gate->mutex);
    if (!gate->open) return;
    BrokerImpl* broker = gate->broker;
    asio::post(broker->io_.context(), [broker, socket, event] {
      if (!broker->running_ || socket != broker->socket_.id) return;  // an old socket's pipe
      {
        std::lock_guard<std::mutex> lock(broker->stats_mutex_);
        auto& n = broker->stats_.connections;
        if (event == NNG_PIPE_EV_ADD_POST) ++n;
        else if (n > 0) --n;
      }
      broker->publish_stats();
    });
  }

  static void on_aio(void* arg) {
    auto* c = static_cast<Ctx*>(arg);
    const int rv = nng_aio_result(c->aio);
    MsgPtr msg(nng_aio_get_msg(c->aio));
    nng_aio_set_msg(c->aio, nullptr);
    std::lock_guard<std::mutex> lock(c->gate->mutex);
    if (!c->gate->open) return;
    BrokerImpl* broker = c->gate->broker;
    asio::post(broker->io_.context(), [broker, key = c->key, rv, msg = std::move(msg)]() mutable {
      broker->completed(key, rv, std::move(msg));
    });
  }


  void completed(std::uint64_t key, int rv, MsgPtr msg);
  void add_receiver();
  void recycle(Ctx& c);
  void reply(std::uint64_t key, const std::string& header, std::string_view payload = {});
  void drop(std::uint64_t key);
  void handle(Ctx& c, nng_msg* msg);

  void waiting(Worker& w);
  void dispatch(Worker& w, std::map<std::uint64_t, Job>::iterator job);
  void forget(const std::string& id);
  void disconnect(std::uint64_t key, std::string_view id);
  void arm(Worker& w, std::chrono::milliseconds after, void (BrokerImpl::*fn)(const std::string&));
  void heartbeat_due(const std::string& id);
  void worker_timed_out(const std::string& id);
  void publish_stats();

  BrokerOptions options_;
  IoThread io_;  // before everything that uses its io_context: destroyed after them

  // io thread only:
  nng_socket socket_ = NNG_SOCKET_INITIALIZER;
  std::shared_ptr<Gate> gate_;
  bool running_ = false;
  std::uint64_t next_key_ = 0;
  std::size_t receivers_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<Ctx>> ctxs_;
  std::map<std::string, Worker> workers_;
  std::map<std::uint64_t, Job> jobs_;  // queued, oldest first
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
  int rv = nng_rep0_open(&socket_);
  if (rv != 0) return std::string("cannot open a rep0 socket: ") + nng_strerror(rv);
  gate_ = std::make_shared<Gate>(this);
  nng_socket_set_size(socket_, NNG_OPT_RECVMAXSZ, 0);  // no limit: payloads of many MiB pass
  nng_pipe_notify(socket_, NNG_PIPE_EV_ADD_POST, &BrokerImpl::on_pipe, gate_.get());
  nng_pipe_notify(socket_, NNG_PIPE_EV_REM_POST, &BrokerImpl::on_pipe, gate_.get());
  nng_listener listener;
  const std::string address = url();
  rv = nng_listen(socket_, address.c_str(), &listener, 0);
  if (rv != 0) {
    nng_close(socket_);
    gate_.reset();
    return "cannot listen on " + address + ": " + nng_strerror(rv);
  }
  if (address.rfind("tcp://", 0) == 0 && address.size() > 2 && address.substr(address.size() - 2) == ":0") {
    int port = 0;
    nng_listener_get_int(listener, NNG_OPT_TCP_BOUND_PORT, &port);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    url_ = address.substr(0, address.size() - 1) + std::to_string(port);
  }
  running_ = true;
  // A restarted broker hands out IDs from a new range.
  next_id_ = static_cast<std::uint32_t>(random_());
  for (std::size_t i = 0; i < kReceivers; ++i) add_receiver();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.starts;
  }
  publish_stats();
  return {};
}

void BrokerImpl::close_all() {
  if (!running_) return;
  running_ = false;
  {
    std::lock_guard<std::mutex> lock(gate_->mutex);
    gate_->open = false;
  }
  // Every pipe drops, every context closes, every aio is freed (after its callback). Bounded:
  // libnng 1.5.2 can hang here (see memodb::detail::run_bounded); then it finishes alone.
  memodb::detail::run_bounded(
      [socket = socket_, ctxs = std::move(ctxs_), gate = gate_]() mutable {
        nng_close(socket);
        for (auto& [key, c] : ctxs) c->open = false;  // closed with the socket
        ctxs.clear();
      },
      memodb::detail::kCloseBound);
  ctxs_.clear();  // completions already posted find nothing
  gate_.reset();
  receivers_ = 0;
  workers_.clear();
  jobs_.clear();
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.connections = 0;
  }
  publish_stats();
}

void BrokerImpl::add_receiver() {
  auto c = std::make_unique<Ctx>(gate_, ++next_key_);
  if (nng_aio_alloc(&c->aio, &BrokerImpl::on_aio, c.get()) != 0) return;
  if (nng_ctx_open(&c->ctx, socket_) != 0) return;
  c->open = true;
  c->state = Ctx::State::receiving;
  ++receivers_;
  nng_ctx_recv(c->ctx, c->aio);
  ctxs_.emplace(c->key, std::move(c));
}

void BrokerImpl::recycle(Ctx& c) {
  // The request it held (if any) is forgotten: its requester never hears from us.
  if (running_ && receivers_ < kReceivers) {
    c.state = Ctx::State::receiving;
    ++receivers_;
    nng_ctx_recv(c.ctx, c.aio);
    return;
  }
  const std::uint64_t key = c.key;
  ctxs_.erase(key);  // nothing is pending on it
}

void BrokerImpl::completed(std::uint64_t key, int rv, MsgPtr msg) {
  auto it = ctxs_.find(key);
  if (it == ctxs_.end() || !running_) return;
  Ctx& c = *it->second;
  if (c.state == Ctx::State::sending) {
    // Sent (or its pipe went away, which the rep protocol also calls a success).
    return recycle(c);
  }
  if (c.state != Ctx::State::receiving) return;
  --receivers_;
  if (rv != 0) return recycle(c);
  c.state = Ctx::State::holding;
  add_receiver();
  handle(c, msg.get());
  publish_stats();
}

void BrokerImpl::reply(std::uint64_t key, const std::string& header, std::string_view payload) {
  auto it = ctxs_.find(key);
  if (it == ctxs_.end() || it->second->state != Ctx::State::holding) return;
  MsgPtr msg = memodb::detail::make_msg(header, payload);
  if (!msg) return drop(key);
  Ctx& c = *it->second;
  c.state = Ctx::State::sending;
  nng_aio_set_msg(c.aio, msg.release());
  nng_ctx_send(c.ctx, c.aio);
}

void BrokerImpl::drop(std::uint64_t key) {
  auto it = ctxs_.find(key);
  if (it == ctxs_.end() || it->second->state != Ctx::State::holding) return;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.dropped;
  }
  recycle(*it->second);
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

void BrokerImpl::handle(Ctx& c, nng_msg* msg) {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.received;
  }
  Header header;
  std::string_view payload;
  if (decode(memodb::detail::body(msg), header, payload)) {
    // The real broker crashes on some of these and drops the rest (a READY with unsorted names,
    // for one) without a reply. This one drops them all and goes on.
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.malformed;
    }
    return drop(c.key);
  }
  switch (header.type) {
    case MessageType::ready: {
      if (header.services.empty()) return drop(c.key);
      std::string id;
      do id = worker_id(next_id_++);
      while (workers_.count(id));
      Worker& w = workers_[id];
      w.id = id;
      w.services.assign(header.services.begin(), header.services.end());
      w.held = c.key;
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
      job.client = c.key;
      job.service = std::string(header.service);
      job.timeout_ms = header.timeout_ms;
      job.payload = std::string(payload);
      // The longest-waiting idle worker that offers the service takes it.
      Worker* best = nullptr;
      for (auto& [id, w] : workers_) {
        if (w.state != Worker::State::waiting) continue;
        if (std::find(w.services.begin(), w.services.end(), job.service) == w.services.end()) continue;
        if (!best || w.since < best->since) best = &w;
      }
      if (best) return dispatch(*best, jobs_.find(seq));
      job.timer = std::make_unique<asio::steady_timer>(io_.context(), options_.queue_timeout);
      job.timer->async_wait([this, seq](std::error_code ec) {
        if (ec) return;
        auto it = jobs_.find(seq);
        if (it == jobs_.end()) return;
        const std::uint64_t client = it->second.client;
        jobs_.erase(it);
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
      if (it == workers_.end()) return disconnect(c.key, header.id);
      Worker& w = it->second;
      if (w.state != Worker::State::busy) {
        forget(w.id);  // out of sync
        return disconnect(c.key, header.id);
      }
      std::string out;
      (void)append_result(out, {});
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.results;
      }
      reply(w.client, out, payload);  // the disconnecting flag is not passed on
      w.client = 0;
      if (header.disconnecting.value_or(false)) {
        forget(w.id);
        return disconnect(c.key, header.id);
      }
      w.held = c.key;
      return waiting(w);
    }
    case MessageType::heartbeat: {
      auto it = workers_.find(std::string(header.id));
      if (it == workers_.end()) return disconnect(c.key, header.id);
      Worker& w = it->second;
      if (w.state != Worker::State::heartbeat) {
        forget(w.id);
        return disconnect(c.key, header.id);
      }
      w.held = c.key;
      return waiting(w);
    }
    case MessageType::disconnect:
      return drop(c.key);
  }
}

void BrokerImpl::waiting(Worker& w) {
  w.state = Worker::State::waiting;
  w.since = ++next_seq_;
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
    if (std::find(w.services.begin(), w.services.end(), it->second.service) != w.services.end())
      return dispatch(w, it);
  arm(w, options_.heartbeat_interval, &BrokerImpl::heartbeat_due);
}

void BrokerImpl::dispatch(Worker& w, std::map<std::uint64_t, Job>::iterator it) {
  Job job = std::move(it->second);
  jobs_.erase(it);
  std::string header;
  (void)append_job(header, w.id, job.service, job.timeout_ms);
  w.state = Worker::State::busy;
  w.client = job.client;
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
  w.state = Worker::State::heartbeat;
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
  Worker w = std::move(it->second);
  workers_.erase(it);
  if (w.timer) w.timer->cancel();
  // Whatever it held is dropped without a word: a waiting request, or its client's job.
  if (w.held) drop(w.held);
  if (w.client) drop(w.client);
}

void BrokerImpl::publish_stats() {
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.workers = workers_.size();
    stats_.idle = 0;
    stats_.workers_by_service.clear();
    for (auto& [id, w] : workers_) {
      if (w.state == Worker::State::waiting) ++stats_.idle;
      for (auto& s : w.services) ++stats_.workers_by_service[s];
    }
    stats_.queued = jobs_.size();
  }
  stats_cv_.notify_all();
}

// ---- Broker ----

std::unique_ptr<Broker> Broker::launch(BrokerOptions options) {
  return std::make_unique<Broker>(std::make_unique<BrokerImpl>(std::move(options)));
}
Broker::Broker(std::unique_ptr<BrokerImpl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() = default;
std::string Broker::url() const { return impl_->url(); }
void Broker::stop() {
  impl_->run([this] {
    impl_->close_all();
    return 0;
  });
}
void Broker::start() {
  auto error = impl_->run([this] { return impl_->listen(); });
  if (!error.empty()) throw std::runtime_error("memodb test broker: " + error);
}
BrokerStats Broker::stats() const { return impl_->stats(); }
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
  explicit MemoDbTestBroker(std::string url) : broker_(Broker::launch(fast_options(std::move(url)))) {}
  std::string url() const override { return "memodb+" + broker_->url() + kFastQuery; }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  bool answers_ping() const override { return false; }  // memo01 has no ping

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
      {"memodb+tcp", "memodb+tcp",
       [] { return std::make_unique<MemoDbTestBroker>(std::string()); },
       [](std::uint16_t port) {
         return std::make_unique<MemoDbTestBroker>("tcp://127.0.0.1:" + std::to_string(port));
       }});
  polybus::testing::register_test_broker({"memodb+ipc", "memodb+ipc", [] {
                                            return std::make_unique<MemoDbTestBroker>(temp_ipc_url());
                                          }});
}

}  // namespace polybus::memodb::testing
