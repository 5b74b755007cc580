#include "connection.hpp"

#include <nng/protocol/reqrep0/req.h>

#include <algorithm>
#include <asio/post.hpp>

#include "polybus/error.hpp"

namespace polybus::memodb::detail {

namespace {

using polybus::errc;

// What a reply-less NNG failure means to the requester.
std::error_code request_error(int rv) {
  switch (rv) {
    case NNG_ETIMEDOUT: return make_error_code(errc::timeout);
    case NNG_ECLOSED:
    case NNG_ECANCELED: return make_error_code(errc::closed);
    default: return make_error_code(errc::disconnected);
  }
}

bool cancelled(int rv) { return rv == NNG_ECANCELED || rv == NNG_ECLOSED; }

std::int64_t remaining_ms(Clock::time_point deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return std::chrono::ceil<std::chrono::milliseconds>(left).count();
}

// A safety margin on top of the broker's own timings before NNG resends a request.
constexpr std::chrono::milliseconds kResendMargin{1000};

}  // namespace

class ServeHandle : public AdapterSubscription {
 public:
  ServeHandle(std::shared_ptr<Connection> connection, std::uint64_t id)
      : connection_(std::move(connection)), id_(id) {}
  void unsubscribe(OpCompletion done) override { connection_->unsubscribe(id_, std::move(done)); }
  void pause() override { connection_->set_paused(id_, true); }
  void resume() override { connection_->set_paused(id_, false); }
  void set_max_in_flight(std::uint32_t n) override { connection_->set_workers(id_, n); }

 private:
  std::shared_ptr<Connection> connection_;
  std::uint64_t id_;
};

Connection::Slot::~Slot() {
  if (ctx_open) nng_ctx_close(ctx);
  if (aio) nng_aio_free(aio);  // waits for a callback that is running
}

Connection::Connection(const AdapterContext& context, ConnectionSettings settings)
    : ctx_(context),
      settings_(std::move(settings)),
      gate_(std::make_shared<Gate>()),
      reconnect_(context, settings_.nng_url),
      dial_watch_timer_(context.strand()),
      close_timer_(context.strand()) {
  gate_->strand.emplace(context.strand());
}

Connection::~Connection() { shutdown(); }

void Connection::open() {
  notifier_ = std::make_unique<Notifier>(Notifier{weak_from_this(), gate_});
  int rv = nng_req0_open(&socket_);
  if (rv != 0)
    throw Error(make_error_code(errc::connect_failed),
                std::string("memodb: cannot open an NNG req0 socket: ") + nng_strerror(rv));
  socket_open_ = true;
  nng_socket_set_size(socket_, NNG_OPT_RECVMAXSZ, settings_.max_message);
  nng_socket_set_ms(socket_, NNG_OPT_RECONNMINT,
                    to_duration(std::max<std::int64_t>(1, settings_.reconnect_min.count())));
  nng_socket_set_ms(socket_, NNG_OPT_RECONNMAXT, to_duration(settings_.reconnect_max.count()));
  nng_pipe_notify(socket_, NNG_PIPE_EV_ADD_PRE, &Connection::on_pipe, notifier_.get());
  nng_pipe_notify(socket_, NNG_PIPE_EV_ADD_POST, &Connection::on_pipe, notifier_.get());
  nng_pipe_notify(socket_, NNG_PIPE_EV_REM_POST, &Connection::on_pipe, notifier_.get());
  // Non-blocking: the dialer keeps trying (and re-dials after a drop) by itself.
  rv = nng_dial(socket_, settings_.nng_url.c_str(), &dialer_, NNG_FLAG_NONBLOCK);
  if (rv != 0)
    throw Error(make_error_code(rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? errc::invalid_url
                                                                          : errc::connect_failed),
                "memodb: cannot dial '" + settings_.nng_url + "': " + nng_strerror(rv));
  asio::post(ctx_.strand(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (self && !self->dead_ && self->pipes_ == 0) {
      self->announce_attempt();
      self->watch_dial();
    }
  });
}

std::chrono::milliseconds Connection::next_dial_within() {
  // NNG waits a random time below a bound that starts at reconnect_min and doubles with each
  // failed attempt up to reconnect_max: what is reported is that bound, the longest it may be.
  if (dial_bound_.count() == 0) dial_bound_ = settings_.reconnect_min;
  const auto within = dial_bound_;
  dial_bound_ =
      std::min(dial_bound_ * 2, std::max(settings_.reconnect_max, settings_.reconnect_min));
  return within;
}

void Connection::watch_dial() {
  if (dial_watched_ || dead_) return;
  dial_watched_ = true;
  dial_failures_seen_ = dial_failures(dialer_);
  check_dial();
}

void Connection::check_dial() {
  if (dead_ || closing_ || pipes_ > 0) {
    dial_watched_ = false;
    return;
  }
  const DialFailures now = dial_failures(dialer_);
  const DialFailures& before = dial_failures_seen_;
  if (now.total() != before.total()) {
    std::error_code why = make_error_code(errc::connect_failed);
    std::string what = "connection refused";
    if (now.proto != before.proto) {
      why = make_error_code(errc::protocol_error), what = "the peer does not speak NNG's req/rep";
    } else if (now.auth != before.auth) {
      why = make_error_code(errc::tls_error), what = "TLS authentication failed";
    } else if (now.timeout != before.timeout) {
      what = "the connection attempt timed out";
    } else if (now.refused == before.refused) {
      what = "the connection attempt failed";
    }
    dial_failures_seen_ = now;
    const std::string detail = "cannot connect to " + settings_.nng_url + ": " + what;
    reconnect_.ended(why, detail);
    reconnect_.retried_by_transport(why, detail, next_dial_within());
  }
  // NNG's next attempt comes within reconnect_min (doubling after each failure): looking more
  // often than every 100 ms finds little new.
  dial_watch_timer_.expires_after(std::clamp(settings_.reconnect_min,
                                             std::chrono::milliseconds(100),
                                             std::chrono::milliseconds(1000)));
  dial_watch_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->check_dial();
  });
}

// ---- NNG callbacks (NNG's threads) ----

void Connection::on_aio(void* arg) {
  auto* slot = static_cast<Slot*>(arg);
  const int rv = nng_aio_result(slot->aio);
  MsgPtr msg(nng_aio_get_msg(slot->aio));  // a reply, or a request NNG gave back
  nng_aio_set_msg(slot->aio, nullptr);
  std::lock_guard<std::mutex> lock(slot->gate->mutex);
  if (!slot->gate->strand) return;  // shut down: the message is freed here
  asio::post(*slot->gate->strand, [weak = slot->connection, key = slot->key, rv,
                                   msg = std::move(msg)]() mutable {
    if (auto self = weak.lock()) self->completed(key, rv, std::move(msg));
  });
}

void Connection::on_pipe(nng_pipe pipe, nng_pipe_ev event, void* arg) {
  auto* notifier = static_cast<Notifier*>(arg);
  std::unique_lock<std::mutex> lock(notifier->gate->mutex);
  Gate& gate = *notifier->gate;
  if (event == NNG_PIPE_EV_REM_POST) {
    // NNG will resend these RESULTs on the next pipe: their contexts are closed on the strand
    // first (closing a context from this callback deadlocks libnng 1.5.2).
    gate.doomed_results.insert(gate.unanswered_results.begin(), gate.unanswered_results.end());
    gate.unanswered_results.clear();
  } else if (event == NNG_PIPE_EV_ADD_PRE && !gate.doomed_results.empty()) {
    // Not yet: the next pipe would carry the resends. The dialer tries again after its reconnect
    // time, by which the strand has closed them (asked again here, so that they are closed even
    // if the strand saw no REM_POST).
    if (gate.strand)
      asio::post(*gate.strand, [weak = notifier->connection] {
        if (auto self = weak.lock(); self && !self->dead_) self->close_doomed_results();
      });
    lock.unlock();
    nng_pipe_close(pipe);
    return;
  }
  if (!gate.strand) return;
  asio::post(*gate.strand, [weak = notifier->connection, event] {
    if (auto self = weak.lock()) self->pipe_event(event);
  });
}

// ---- strand ----

void Connection::announce_attempt() {
  if (attempt_announced_) return;
  attempt_announced_ = true;
  reconnect_.attempting();
}

void Connection::pipe_event(nng_pipe_ev event) {
  if (dead_) return;
  if (event == NNG_PIPE_EV_ADD_PRE) {
    // NNG's dialer attempts on its own; a new pipe is the first the client sees of an attempt.
    if (pipes_ == 0) announce_attempt();
  } else if (event == NNG_PIPE_EV_ADD_POST) {
    if (pipes_++ == 0) reconnect_.connected(), dial_bound_ = settings_.reconnect_min;
  } else if (event == NNG_PIPE_EV_REM_POST) {
    // Whatever the count says: NNG's threads may deliver a pipe's REM_POST before its ADD_POST.
    close_doomed_results();
  }
  if (event == NNG_PIPE_EV_REM_POST && pipes_ > 0) {
    if (--pipes_ == 0 && !closing_) {
      auto why = make_error_code(errc::disconnected);
      const std::string detail = "the connection to the broker at " + settings_.nng_url + " ended";
      reconnect_.ended(why, detail);
      attempt_announced_ = false;
      // NNG's dialer reconnects by itself, after its own reconnect time.
      reconnect_.retried_by_transport(why, detail, next_dial_within());
      watch_dial();
    }
  }
}

void Connection::set_result_unanswered(WorkerSlot& worker, bool unanswered) {
  if (worker.result_unanswered == unanswered || !worker.ctx_open) return;
  worker.result_unanswered = unanswered;
  // No timed resend of a RESULT either: one that the broker took while its answer was held up
  // (a stalled link) would come again after the broker had given the worker the next job.
  nng_ctx_set_ms(worker.ctx, NNG_OPT_REQ_RESENDTIME,
                 unanswered ? NNG_DURATION_INFINITE : to_duration(worker_resend_time().count()));
  if (!worker.answer_timer)
    worker.answer_timer = std::make_unique<asio::steady_timer>(ctx_.strand());
  if (unanswered) {
    worker.answer_timer->expires_after(worker_resend_time());
    worker.answer_timer->async_wait(
        [weak = weak_from_this(), key = worker.key](std::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || self->dead_) return;
          if (auto it = self->workers_.find(key); it != self->workers_.end())
            self->give_up_result(*it->second);
        });
  } else {
    worker.answer_timer->cancel();
  }
  const std::uint32_t id = static_cast<std::uint32_t>(nng_ctx_id(worker.ctx));
  std::lock_guard<std::mutex> lock(gate_->mutex);
  if (unanswered)
    gate_->unanswered_results.insert(id);
  else
    gate_->unanswered_results.erase(id);
}

void Connection::close_doomed_results() {
  std::set<std::uint32_t> doomed;
  {
    std::lock_guard<std::mutex> lock(gate_->mutex);
    doomed = gate_->doomed_results;
  }
  for (std::uint32_t id : doomed) {
    nng_ctx ctx;
    ctx.id = id;
    nng_ctx_close(ctx);  // its pending operation completes with NNG_ECLOSED
  }
  std::lock_guard<std::mutex> lock(gate_->mutex);
  for (std::uint32_t id : doomed) gate_->doomed_results.erase(id);
  gate_->abandoned_results.insert(doomed.begin(), doomed.end());
}

// The broker has not answered a RESULT within the worker's resend time (it dropped the worker,
// or the link stalls): the context goes, as when a pipe goes, and the worker registers afresh.
void Connection::give_up_result(WorkerSlot& worker) {
  if (!worker.result_unanswered || !worker.pending || !worker.ctx_open) return;
  const std::uint32_t id = static_cast<std::uint32_t>(nng_ctx_id(worker.ctx));
  {
    std::lock_guard<std::mutex> lock(gate_->mutex);
    gate_->unanswered_results.erase(id);
    gate_->abandoned_results.insert(id);
  }
  nng_ctx_close(worker.ctx);  // its pending operation completes with NNG_ECLOSED
}

// Whether this worker's context was closed because its RESULT was unanswered when a pipe went.
bool Connection::take_abandoned(WorkerSlot& worker) {
  if (!worker.result_unanswered || !worker.ctx_open) return false;
  const std::uint32_t id = static_cast<std::uint32_t>(nng_ctx_id(worker.ctx));
  std::lock_guard<std::mutex> lock(gate_->mutex);
  if (gate_->abandoned_results.erase(id) == 0) return false;
  worker.result_unanswered = false;
  worker.ctx_open = false;  // closed already
  return true;
}

void Connection::completed(std::uint64_t key, int rv, MsgPtr msg) {
  if (dead_) return;
  if (auto it = requests_.find(key); it != requests_.end())
    return request_completed(*it->second, rv, std::move(msg));
  if (auto it = workers_.find(key); it != workers_.end())
    return worker_completed(*it->second, rv, std::move(msg));
}

template <typename T>
std::unique_ptr<T> Connection::make_slot() {
  auto slot = std::make_unique<T>(++next_key_, weak_from_this(), gate_);
  if (nng_aio_alloc(&slot->aio, &Connection::on_aio, static_cast<Slot*>(slot.get())) != 0) return nullptr;
  return slot;
}

bool Connection::open_ctx(Slot& slot, std::chrono::milliseconds resend) {
  if (!slot.ctx_open) {
    if (nng_ctx_open(&slot.ctx, socket_) != 0) return false;
    slot.ctx_open = true;
  }
  nng_ctx_set_ms(slot.ctx, NNG_OPT_REQ_RESENDTIME, to_duration(resend.count()));
  return true;
}

void Connection::cancel(Slot& slot) {
  if (slot.pending) nng_aio_cancel(slot.aio);
}

// ---- requests ----

void Connection::request(RequestWork work) {
  if (closing_) return work.done(make_error_code(errc::closed), {}, "client closed");
  if (auto ec = validate_service(work.topic))
    return work.done(make_error_code(errc::invalid_argument), {},
                     "memodb: service name '" + work.topic + "': " + ec.message());
  if (active_requests_ >= settings_.max_requests) {
    // Waits for a free slot, up to its deadline (the core completes it then).
    while (!waiting_.empty() && waiting_.front().done.done()) waiting_.pop_front();
    waiting_.push_back(std::move(work));
    return;
  }
  start_request(std::move(work));
}

void Connection::start_request(RequestWork work) {
  if (work.done.done()) return;
  const std::int64_t left = remaining_ms(work.done.deadline());
  if (left <= 0) return work.done(make_error_code(errc::timeout), {}, "deadline passed");
  // The broker waits this long for the worker's RESULT: by default what is left of ours.
  const std::int64_t job_ms = settings_.job_timeout.count() > 0 ? settings_.job_timeout.count() : left;
  std::string header;
  if (auto ec = Requester::job(header, work.topic, static_cast<std::uint64_t>(job_ms)))
    return work.done(make_error_code(errc::invalid_argument), {}, ec.message());
  MsgPtr msg = make_msg(header, work.payload);

  RequestSlot* slot = nullptr;
  if (!idle_requests_.empty()) {
    slot = idle_requests_.back();
    idle_requests_.pop_back();
  } else if (auto fresh = make_slot<RequestSlot>()) {
    slot = fresh.get();
    requests_.emplace(slot->key, std::move(fresh));
  }
  // NNG resends only once the broker has surely dropped the job (queue wait + job time), so a
  // slow queue never has a worker run it twice; a dropped connection resends at once.
  const auto resend = settings_.queue_timeout + std::chrono::milliseconds(job_ms) + kResendMargin;
  if (!slot || !msg || !open_ctx(*slot, resend)) {
    if (slot) idle_requests_.push_back(slot);
    return work.done(make_error_code(errc::disconnected), {}, "memodb: out of NNG resources");
  }
  ++active_requests_;
  slot->done = std::move(work.done);
  slot->service = std::move(work.topic);
  slot->phase = RequestSlot::Phase::sending;
  slot->pending = true;
  ctx_.count_bytes_out(work.payload.size());
  nng_aio_set_msg(slot->aio, msg.release());
  nng_aio_set_timeout(slot->aio, to_duration(left));
  nng_ctx_send(slot->ctx, slot->aio);
}

void Connection::request_completed(RequestSlot& slot, int rv, MsgPtr msg) {
  slot.pending = false;
  if (slot.phase == RequestSlot::Phase::sending) {
    if (rv != 0)
      return finish_request(slot, request_error(rv), {},
                            rv == NNG_ETIMEDOUT ? "deadline passed before the broker was reached"
                                                : std::string("memodb: ") + nng_strerror(rv));
    const std::int64_t left = remaining_ms(slot.done.deadline());
    if (slot.done.done() || left <= 0 || closing_) {
      // Abandon the request: a new context leaves no resend behind.
      nng_ctx_close(slot.ctx);
      slot.ctx_open = false;
      return finish_request(slot, make_error_code(closing_ ? errc::closed : errc::timeout), {},
                            closing_ ? "client closed" : "deadline passed");
    }
    slot.phase = RequestSlot::Phase::receiving;
    slot.pending = true;
    nng_aio_set_timeout(slot.aio, to_duration(left));
    nng_ctx_recv(slot.ctx, slot.aio);
    return;
  }
  if (rv != 0)
    return finish_request(slot, request_error(rv), {},
                          rv == NNG_ETIMEDOUT ? "deadline passed before a RESULT came (no worker, "
                                                "or the worker timed out: the broker drops such "
                                                "jobs without a word)"
                                              : std::string("memodb: ") + nng_strerror(rv));
  ctx_.count_bytes_in(nng_msg_len(msg.get()));
  auto answer = Requester::answer(body(msg.get()), slot.service);
  finish_request(slot, answer.ec, std::string(answer.payload), std::move(answer.why));
}

void Connection::finish_request(RequestSlot& slot, std::error_code ec, std::string reply,
                             std::string detail) {
  auto done = std::move(slot.done);
  slot.done = OpCompletion();
  slot.phase = RequestSlot::Phase::idle;
  slot.service.clear();
  --active_requests_;
  if (idle_requests_.size() < settings_.max_requests) {
    idle_requests_.push_back(&slot);
  } else {
    const std::uint64_t key = slot.key;
    requests_.erase(key);  // nothing is pending on it
  }
  done(ec, std::move(reply), std::move(detail));
  pump_requests();
  maybe_finish_close();
}

void Connection::pump_requests() {
  while (!closing_ && active_requests_ < settings_.max_requests && !waiting_.empty()) {
    RequestWork work = std::move(waiting_.front());
    waiting_.pop_front();
    start_request(std::move(work));
  }
}

// ---- workers ----

std::shared_ptr<AdapterSubscription> Connection::serve(const std::string& service,
                                                    std::uint32_t workers,
                                                    std::shared_ptr<SubscriptionSink> sink) {
  if (auto ec = validate_service(service))
    throw Error(make_error_code(errc::invalid_argument),
                "memodb: service name '" + service + "': " + ec.message());
  if (closing_) throw Error(make_error_code(errc::closed), "memodb: client closed");
  const std::uint64_t id = ++next_serve_;
  auto& record = serves_[id];
  record.service = service;
  record.sink = std::move(sink);
  record.target = workers;
  for (std::uint32_t i = 0; i < record.target; ++i)
    if (WorkerSlot* worker = add_worker(id, record)) start_worker(*worker);
  return std::make_shared<ServeHandle>(shared_from_this(), id);
}

Connection::WorkerSlot* Connection::add_worker(std::uint64_t serve_id, ServeRecord& serve) {
  auto worker = make_slot<WorkerSlot>();
  if (!worker) {
    ctx_.error(make_error_code(errc::disconnected), "memodb: out of NNG resources for a worker");
    return nullptr;
  }
  worker->serve = serve_id;
  worker->machine = Worker(serve.service);
  WorkerSlot* raw = worker.get();
  serve.workers.push_back(raw->key);
  workers_.emplace(raw->key, std::move(worker));
  return raw;
}

bool Connection::should_run(const WorkerSlot& worker) const {
  if (closing_ || worker.retire) return false;
  auto it = serves_.find(worker.serve);
  return it != serves_.end() && !it->second.gone && !it->second.paused;
}

std::string Connection::describe(const WorkerSlot& worker) const {
  auto it = serves_.find(worker.serve);
  return "memodb worker for '" + (it == serves_.end() ? std::string("?") : it->second.service) + "'";
}

std::chrono::milliseconds Connection::worker_resend_time() const {
  return settings_.heartbeat_interval + settings_.heartbeat_timeout + kResendMargin;
}

void Connection::start_worker(WorkerSlot& worker) {
  auto it = serves_.find(worker.serve);
  if (it == serves_.end()) return stop_worker(worker);
  // A worker's request waits at most heartbeat_interval for its reply; resending sooner
  // would register a phantom worker.
  std::string header;
  MsgPtr msg;
  if (!worker.machine.ready(header) && open_ctx(worker, worker_resend_time()))
    msg = make_msg(header);
  send_worker(worker, std::move(msg));
}

void Connection::send_worker(WorkerSlot& worker, MsgPtr msg) {
  if (!msg) {
    ctx_.error(make_error_code(errc::disconnected), describe(worker) + ": out of NNG resources");
    return stop_worker(worker);
  }
  worker.pending = true;
  nng_aio_set_msg(worker.aio, msg.release());
  nng_aio_set_timeout(worker.aio, NNG_DURATION_INFINITE);
  nng_ctx_send(worker.ctx, worker.aio);
}

void Connection::worker_completed(WorkerSlot& worker, int rv, MsgPtr msg) {
  worker.pending = false;
  if (take_abandoned(worker)) {
    // The broker, which may have taken the RESULT and handed this worker a job that the lost
    // connection took with it, times that job out; it never gets this RESULT again.
    worker.machine.stop();
    ctx_.log(LogLevel::debug, describe(worker) +
                                  ": the connection dropped before the broker "
                                  "answered its RESULT; registering afresh");
    return restart_or_stop(worker);
  }
  if (rv != 0) {
    if (cancelled(rv) || closing_) {
      if (!cancelled(rv))
        ctx_.error(nng_error(rv), describe(worker) + ": " + nng_strerror(rv) + "; worker stopped");
      return stop_worker(worker);
    }
    // The connection failed under the exchange (libnng 1.5.2 fails it with NNG_ECONNRESET when
    // the pipe is reset): the worker registers afresh on a new context rather than stopping for
    // good, which left a serve() without workers after one reset.
    ctx_.log(LogLevel::debug, describe(worker) + ": " + nng_strerror(rv) + "; registering afresh");
    set_result_unanswered(worker, false);
    nng_ctx_close(worker.ctx);
    worker.ctx_open = false;
    worker.machine.stop();
    return restart_or_stop(worker);
  }
  if (worker.machine.state() == Worker::State::sending) {
    if (!worker.machine.sent(closing_)) return stop_worker(worker);
    auto it = serves_.find(worker.serve);
    if (it != serves_.end() && !it->second.confirmed && it->second.sink) {
      // The READY reached the broker's connection: the best confirmation memo01 gives (the
      // broker's first answer can be a HEARTBEAT a whole heartbeat interval later).
      it->second.confirmed = true;
      it->second.sink->ready({});
    }
    worker.pending = true;
    nng_aio_set_timeout(worker.aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(worker.ctx, worker.aio);
    return;
  }
  set_result_unanswered(worker, false);
  ctx_.count_bytes_in(nng_msg_len(msg.get()));
  auto step = worker.machine.received(body(msg.get()), should_run(worker));
  if (step.ec) {
    // What follows is the machine's decision: a worker that is leaving does not register again.
    const bool stops = step.next == Worker::Next::stop;
    ctx_.error(step.ec, describe(worker) + ": " + step.why +
                            (stops ? "; the worker stops" : "; registering again"));
  }
  switch (step.next) {
    case Worker::Next::handle:
      return on_job(worker, step.service, step.payload, std::move(msg));
    case Worker::Next::send:
      // Registered: the broker knows the worker, so a later DISCONNECT starts the backoff over.
      if (worker.reregister) worker.reregister->succeeded();
      return send_worker(worker, make_msg(step.out));
    case Worker::Next::register_again:
      return restart_or_stop(worker);
    case Worker::Next::stop:
      return stop_worker(worker);
    case Worker::Next::register_again_later: {
      // READY again after the reconnect policy's delay: a broker answering every READY with
      // DISCONNECT must not get thousands a second.
      if (!worker.reregister)
        worker.reregister = std::make_unique<Reconnector>(ctx_.strand(), ctx_.backoff());
      const std::uint64_t key = worker.key;
      auto delay = worker.reregister->schedule([weak = weak_from_this(), key] {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        auto found = self->workers_.find(key);
        if (found == self->workers_.end()) return;
        WorkerSlot& w = *found->second;
        if (w.machine.state() == Worker::State::stopped && !w.pending) self->restart_or_stop(w);
      });
      ctx_.log(LogLevel::debug, describe(worker) + ": DISCONNECT from the broker; READY again in " +
                                    std::to_string(delay.count()) + "ms");
      return;
    }
  }
}

void Connection::on_job(WorkerSlot& worker, std::string_view service, std::string_view payload,
                     MsgPtr msg) {
  if (worker.reregister) worker.reregister->succeeded();
  auto it = serves_.find(worker.serve);
  if (closing_ || it == serves_.end() || it->second.gone || !it->second.sink) {
    ctx_.log(LogLevel::warn, describe(worker) + ": a JOB arrived while closing or after "
                                                "unsubscribe; it is dropped and its requester "
                                                "will time out");
    return stop_worker(worker);
  }
  ++worker.job_seq;
  auto state = ctx_.make_message(weak_from_this());
  state->topic = std::string(service);
  state->payload = payload;
  state->buffer = std::shared_ptr<nng_msg>(msg.release(), MsgFree{});
  state->expects_reply = true;
  state->adapter_token = (worker.key << 32) | worker.job_seq;
  it->second.sink->deliver(Message(std::move(state)));
}

void Connection::reply(polybus::detail::MessageState& message, std::string payload,
                    std::error_code ec, std::string detail) {
  if (dead_) return;
  auto it = workers_.find(message.adapter_token >> 32);
  if (it == workers_.end()) return;
  WorkerSlot& worker = *it->second;
  if (worker.machine.state() != Worker::State::handling ||
      worker.job_seq != static_cast<std::uint32_t>(message.adapter_token & 0xffffffffu))
    return;
  if (ec) {
    // memo01 has no error reply: the broker hands the requester only a RESULT payload. Without
    // one, the broker gives up on the job after its timeout and the requester times out.
    ctx_.log(LogLevel::warn, describe(worker) + ": no RESULT sent (" +
                                 (detail.empty() ? ec.message() : detail) +
                                 "); the requester will time out");
    return restart_or_stop(worker);
  }
  // Leaving (paused, unsubscribed, retired or closing): the last RESULT says so, and the
  // broker answers DISCONNECT instead of another job.
  std::string header;
  MsgPtr msg;
  if (!worker.machine.result(header, !should_run(worker))) msg = make_msg(header, payload);
  if (msg) set_result_unanswered(worker, true);
  ctx_.count_bytes_out(payload.size());
  send_worker(worker, std::move(msg));
}

void Connection::restart_or_stop(WorkerSlot& worker) {
  if (should_run(worker)) return start_worker(worker);
  stop_worker(worker);
}

void Connection::stop_worker(WorkerSlot& worker) {
  worker.machine.stop();
  auto it = serves_.find(worker.serve);
  const bool gone = it == serves_.end() || it->second.gone;
  if ((worker.retire || gone) && !worker.pending) {
    if (it != serves_.end()) {
      auto& list = it->second.workers;
      list.erase(std::remove(list.begin(), list.end(), worker.key), list.end());
      if (gone && list.empty()) serves_.erase(it);
    }
    const std::uint64_t key = worker.key;
    workers_.erase(key);  // worker is gone from here on
  }
  maybe_finish_close();
}

void Connection::unsubscribe(std::uint64_t serve, OpCompletion done) {
  auto it = serves_.find(serve);
  if (it != serves_.end() && !it->second.gone) {
    it->second.gone = true;
    it->second.sink.reset();
    const auto keys = it->second.workers;
    for (auto key : keys) {
      auto w = workers_.find(key);
      if (w == workers_.end()) continue;
      WorkerSlot& worker = *w->second;
      if (worker.pending && !worker.machine.leaving()) cancel(worker);  // its completion stops it
      else if (worker.machine.state() == Worker::State::stopped) stop_worker(worker);
      // A worker handling a job sends its RESULT (with disconnecting) and then leaves.
    }
  }
  done({});
}

void Connection::set_paused(std::uint64_t serve, bool paused) {
  auto it = serves_.find(serve);
  if (it == serves_.end() || it->second.gone || it->second.paused == paused) return;
  it->second.paused = paused;
  // Pausing is passive: a waiting worker still takes the job the broker may already have
  // chosen it for, then says it is leaving; one that gets a HEARTBEAT stops without answering.
  if (paused) return;
  const auto keys = it->second.workers;
  for (auto key : keys) {
    auto w = workers_.find(key);
    if (w != workers_.end() && w->second->machine.state() == Worker::State::stopped && should_run(*w->second))
      start_worker(*w->second);
  }
}

void Connection::set_workers(std::uint64_t serve, std::uint32_t count) {
  auto it = serves_.find(serve);
  if (it == serves_.end() || it->second.gone) return;
  it->second.target = count;
  std::vector<WorkerSlot*> active;
  for (auto key : it->second.workers) {
    auto w = workers_.find(key);
    if (w != workers_.end() && !w->second->retire) active.push_back(w->second.get());
  }
  if (active.size() < count) {
    for (std::size_t n = active.size(); n < count; ++n) {
      WorkerSlot* worker = add_worker(serve, it->second);
      if (worker && should_run(*worker)) start_worker(*worker);
    }
    return;
  }
  // Retire the surplus, stopped workers first; the others leave as a pause makes them.
  std::stable_partition(active.begin(), active.end(), [](const WorkerSlot* w) {
    return w->machine.state() == Worker::State::stopped;
  });
  for (std::size_t n = 0; n < active.size() - count; ++n) {
    active[n]->retire = true;
    if (active[n]->machine.state() == Worker::State::stopped) stop_worker(*active[n]);
  }
}

// ---- close ----

void Connection::close(Clock::time_point deadline, std::function<void()> done) {
  if (dead_) {
    if (done) done();
    return;
  }
  closing_ = true;
  close_pending_ = true;
  close_done_ = std::move(done);
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& work : waiting) work.done(make_error_code(errc::closed), {}, "client closed");
  for (auto& [key, slot] : requests_) cancel(*slot);
  // Workers whose last RESULT is on its way get until the deadline for the broker's DISCONNECT;
  // the others stop now. An idle worker's registration then lingers at the broker until its
  // heartbeat fails (the real broker's behaviour; a job handed to it meanwhile times out).
  for (auto& [key, worker] : workers_)
    if (!worker->machine.leaving()) cancel(*worker);
  close_timer_.expires_at(deadline);
  close_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->finish_close();
  });
  maybe_finish_close();
}

void Connection::maybe_finish_close() {
  if (!close_pending_ || dead_) return;
  for (auto& [key, slot] : requests_)
    if (slot->pending) return;
  for (auto& [key, worker] : workers_)
    if (worker->pending) return;
  finish_close();
}

void Connection::finish_close() {
  if (dead_) return;
  close_timer_.cancel();
  auto done = std::move(close_done_);
  close_done_ = nullptr;
  shutdown();
  ctx_.state(ConnectionState::closed, settings_.nng_url);
  if (done) done();
}

void Connection::shutdown() {
  if (dead_) return;
  dead_ = true;
  closing_ = true;
  dial_watch_timer_.cancel();
  {
    // From here on NNG's callbacks post nothing: they may outlive the strand.
    std::lock_guard<std::mutex> lock(gate_->mutex);
    gate_->strand.reset();
  }
  // Whatever is left completes now, exactly once (the core's own deadline may have won).
  for (auto& [key, slot] : requests_) {
    auto done = std::move(slot->done);
    slot->done = OpCompletion();
    if (done) done(make_error_code(errc::closed), {}, "client closed");
  }
  for (auto& work : waiting_) work.done(make_error_code(errc::closed), {}, "client closed");
  waiting_.clear();
  idle_requests_.clear();
  serves_.clear();  // drops the sinks (the core's subscriptions)

  // Close the socket (every context with it) and free the aios, waiting for their callbacks.
  std::vector<std::unique_ptr<Slot>> slots;
  for (auto& [key, slot] : requests_) slots.push_back(std::move(slot));
  for (auto& [key, worker] : workers_) slots.push_back(std::move(worker));
  requests_.clear();
  workers_.clear();
  const bool finished = run_bounded(
      [socket = socket_, open = socket_open_, slots = std::move(slots),
       notifier = std::move(notifier_)]() mutable {
        if (open) nng_close(socket);
        for (auto& slot : slots) slot->ctx_open = false;  // closed with the socket
        slots.clear();
        notifier.reset();
      },
      kCloseBound);
  socket_open_ = false;
  if (!finished)
    ctx_.log(LogLevel::error, "memodb: NNG did not finish closing the socket within " +
                                  std::to_string(kCloseBound.count()) +
                                  " ms (a libnng 1.5.2 defect, fixed in 1.6.0); it is left to "
                                  "finish in the background");
}

}  // namespace polybus::memodb::detail
