// SPDX-License-Identifier: Apache-2.0
#include "connection.hpp"

#include <algorithm>
#include <asio/post.hpp>

#include "polybus/error.hpp"

namespace polybus::memodb::detail {

namespace {

using polybus::errc;

// The exchange was ended on purpose (cancel, close): nothing to report.
bool cancelled(std::error_code ec) {
  return ec == make_error_code(errc::closed);
}

std::int64_t remaining_ms(Clock::time_point deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return std::chrono::ceil<std::chrono::milliseconds>(left).count();
}

// A safety margin on top of the broker's own timings before a request is resent.
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

Connection::Connection(const AdapterContext& context, ConnectionSettings settings)
    : ctx_(context),
      settings_(std::move(settings)),
      reconnect_(context, settings_.address),
      close_timer_(context.strand()) {}

Connection::~Connection() {
  shutdown();
}

void Connection::open() {
  Req0Settings s;
  s.address = settings_.address;
  s.max_message = settings_.max_message;
  s.connect_timeout = settings_.connect_timeout;
  s.frame_timeout = settings_.frame_timeout;
  s.write_timeout = settings_.write_timeout;
  Req0Socket::Events events;
  events.connected = [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->connected();
  };
  events.ended = [weak = weak_from_this()](std::error_code why, const std::string& detail,
                                           bool was_up) {
    if (auto self = weak.lock()) self->ended(why, detail, was_up);
  };
  events.bytes_in = [weak = weak_from_this()](std::size_t n) {
    if (auto self = weak.lock()) self->ctx_.count_bytes_in(n);
  };
  socket_ = std::make_shared<Req0Socket>(ctx_.strand(), std::move(s), std::move(events));
  asio::post(ctx_.strand(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->dead_) return;
    self->reconnect_.attempting();
    self->socket_->connect();
  });
}

void Connection::connected() {
  reconnect_.connected();
  count_waiting();
}

void Connection::ended(std::error_code why, const std::string& detail, bool) {
  if (dead_ || closing_) return;
  count_waiting();
  reconnect_.lost(why, detail, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->dead_ || self->closing_) return;
    self->reconnect_.attempting();
    self->socket_->connect();
  });
}

std::chrono::milliseconds Connection::worker_resend_time() const {
  return settings_.heartbeat_interval + settings_.heartbeat_timeout + kResendMargin;
}

void Connection::cancel(Slot& slot) {
  if (slot.pending && slot.exchange)
    socket_->cancel(slot.exchange, make_error_code(errc::closed), "client closed");
}

// ---- requests ----

void Connection::request(RequestWork work) {
  if (closing_) return work.done(make_error_code(errc::closed), {}, "client closed");
  if (auto ec = validate_service(work.topic))
    return work.done(make_error_code(errc::invalid_argument), {},
                     "memodb: service name '" + work.topic + "': " + ec.message());
  if (active_requests_ >= settings_.max_requests) {
    // Waits for a free slot, up to its deadline (the core completes it then).
    waiting_.push_back(std::move(work));
  } else {
    start_request(std::move(work));
  }
  count_waiting();
}

void Connection::count_waiting() {
  if (closing_) return ctx_.waiting_requests(0);
  // Those whose deadline passed have been failed by the core: they no longer wait.
  while (!waiting_.empty() && waiting_.front().done.done()) waiting_.pop_front();
  const bool up = socket_ && socket_->up();
  ctx_.waiting_requests(waiting_.size() + (up ? 0 : active_requests_));
}

void Connection::start_request(RequestWork work) {
  if (work.done.done()) return;
  const std::int64_t left = remaining_ms(work.done.deadline());
  if (left <= 0) return work.done(make_error_code(errc::timeout), {}, "deadline passed");
  // The broker waits this long for the worker's RESULT: by default what is left of ours.
  const std::int64_t job_ms =
      settings_.job_timeout.count() > 0 ? settings_.job_timeout.count() : left;
  std::string message;
  if (auto ec = Requester::job(message, work.topic, static_cast<std::uint64_t>(job_ms)))
    return work.done(make_error_code(errc::invalid_argument), {}, ec.message());
  message.append(work.payload);

  RequestSlot* slot = nullptr;
  if (!idle_requests_.empty()) {
    slot = idle_requests_.back();
    idle_requests_.pop_back();
  } else {
    auto fresh = std::make_unique<RequestSlot>(++next_key_);
    slot = fresh.get();
    requests_.emplace(slot->key, std::move(fresh));
  }
  // Resent only once the broker has surely dropped the job (queue wait + job time), so a slow
  // queue never has a worker run it twice; a dropped connection resends it at once.
  const auto resend = settings_.queue_timeout + std::chrono::milliseconds(job_ms) + kResendMargin;
  ++active_requests_;
  slot->done = std::move(work.done);
  slot->service = std::move(work.topic);
  slot->pending = true;
  ctx_.count_bytes_out(work.payload.size());
  const std::uint64_t key = slot->key;
  slot->exchange = socket_->exchange(
      std::move(message), resend, std::chrono::milliseconds(left), {},
      [weak = weak_from_this(), key](std::error_code ec, std::string reply, std::string detail) {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        auto it = self->requests_.find(key);
        if (it != self->requests_.end())
          self->request_completed(*it->second, ec, std::move(reply), std::move(detail));
      });
}

void Connection::request_completed(RequestSlot& slot, std::error_code ec, std::string reply,
                                   std::string detail) {
  slot.pending = false;
  slot.exchange = 0;
  if (ec == make_error_code(errc::timeout))
    return finish_request(slot, ec, {},
                          "deadline passed before a RESULT came (no worker, the broker "
                          "unreachable, or the worker timed out: the broker drops such jobs "
                          "without a word)");
  if (ec) return finish_request(slot, ec, {}, "memodb: " + detail);
  reconnect_.proven();  // the broker answered: the backoff starts over
  auto answer = Requester::answer(reply, slot.service);
  finish_request(slot, answer.ec, std::string(answer.payload), std::move(answer.why));
}

void Connection::finish_request(RequestSlot& slot, std::error_code ec, std::string reply,
                                std::string detail) {
  auto done = std::move(slot.done);
  slot.done = OpCompletion();
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
  count_waiting();
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
  auto worker = std::make_unique<WorkerSlot>(++next_key_);
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
  return "memodb worker for '" + (it == serves_.end() ? std::string("?") : it->second.service) +
         "'";
}

void Connection::start_worker(WorkerSlot& worker) {
  auto it = serves_.find(worker.serve);
  if (it == serves_.end()) return stop_worker(worker);
  std::string header;
  if (auto ec = worker.machine.ready(header)) {
    ctx_.error(ec, describe(worker) + ": cannot build READY: " + ec.message());
    return stop_worker(worker);
  }
  send_worker(worker, std::move(header), false);
}

void Connection::send_worker(WorkerSlot& worker, std::string message, bool result) {
  // READY and a HEARTBEAT's answer wait at most heartbeat_interval for the broker's answer:
  // resending sooner would register a phantom worker. A RESULT is never resent, neither on
  // this connection nor on the next: memo01's RESULT names only the worker, so one the broker
  // had taken (its answer, the next JOB, lost with the connection or held up on a stalled
  // link) would hand the old result to the next job's requester. Unanswered past the resend
  // time, or cut off with its connection, the worker registers afresh instead.
  worker.pending = true;
  const std::uint64_t key = worker.key;
  worker.exchange = socket_->exchange(
      std::move(message), result ? std::chrono::milliseconds(0) : worker_resend_time(),
      result ? worker_resend_time() : std::chrono::milliseconds(0),
      [weak = weak_from_this(), key] {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        if (auto it = self->workers_.find(key); it != self->workers_.end())
          self->worker_sent(*it->second);
      },
      [weak = weak_from_this(), key](std::error_code ec, std::string reply, std::string detail) {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        if (auto it = self->workers_.find(key); it != self->workers_.end())
          self->worker_completed(*it->second, ec, std::move(reply), std::move(detail));
      });
}

void Connection::worker_sent(WorkerSlot& worker) {
  if (worker.machine.state() != Worker::State::sending) return;
  if (!worker.machine.sent(closing_)) {
    // Closing, and this was not the worker's leaving RESULT: it waits for no answer.
    return socket_->cancel(worker.exchange, make_error_code(errc::closed), "client closed");
  }
  auto it = serves_.find(worker.serve);
  if (it != serves_.end() && !it->second.confirmed && it->second.sink) {
    // The READY reached the broker's connection: the best confirmation memo01 gives (the
    // broker's first answer can be a HEARTBEAT a whole heartbeat interval later).
    it->second.confirmed = true;
    it->second.sink->ready({});
  }
}

void Connection::worker_completed(WorkerSlot& worker, std::error_code ec, std::string reply,
                                  std::string detail) {
  worker.pending = false;
  worker.exchange = 0;
  if (ec) {
    if (cancelled(ec) || closing_) return stop_worker(worker);
    // The connection dropped under the exchange, or the broker never answered a RESULT: the
    // worker registers afresh rather than stopping for good. The broker times out a job it may
    // have handed it meanwhile.
    ctx_.log(LogLevel::debug, describe(worker) + ": " + detail + "; registering afresh");
    worker.machine.stop();
    return restart_or_stop(worker);
  }
  if (worker.machine.state() == Worker::State::sending) {
    // The answer came before the write's completion was seen: the write was done.
    worker_sent(worker);
    if (worker.machine.state() != Worker::State::receiving) return stop_worker(worker);
  }
  reconnect_.proven();  // the broker answered: the backoff starts over
  auto message = std::make_shared<const std::string>(std::move(reply));
  auto step = worker.machine.received(*message, should_run(worker));
  if (step.ec) {
    // What follows is the machine's decision: a worker that is leaving does not register again.
    const bool stops = step.next == Worker::Next::stop;
    ctx_.error(step.ec, describe(worker) + ": " + step.why +
                            (stops ? "; the worker stops" : "; registering again"));
  }
  switch (step.next) {
    case Worker::Next::handle:
      return on_job(worker, step.service, step.payload, std::move(message));
    case Worker::Next::send:
      // Registered: the broker knows the worker, so a later DISCONNECT starts the backoff over.
      if (worker.reregister) worker.reregister->succeeded();
      return send_worker(worker, std::move(step.out), false);
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
                        std::shared_ptr<const std::string> message) {
  if (worker.reregister) worker.reregister->succeeded();
  auto it = serves_.find(worker.serve);
  if (closing_ || it == serves_.end() || it->second.gone || !it->second.sink) {
    ctx_.log(LogLevel::warn, describe(worker) +
                                 ": a JOB arrived while closing or after "
                                 "unsubscribe; it is dropped and its requester "
                                 "will time out");
    return stop_worker(worker);
  }
  ++worker.job_seq;
  auto state = ctx_.make_message(weak_from_this());
  state->topic = std::string(service);
  state->payload = payload;
  state->buffer = std::move(message);  // payload is a view into it
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
  std::string result;
  if (auto result_ec = worker.machine.result(result, !should_run(worker))) {
    ctx_.error(result_ec, describe(worker) + ": cannot build RESULT: " + result_ec.message());
    worker.machine.stop();
    return restart_or_stop(worker);
  }
  result.append(payload);
  ctx_.count_bytes_out(payload.size());
  send_worker(worker, std::move(result), true);
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
      if (worker.pending && !worker.machine.leaving())
        cancel(worker);  // its completion stops it
      else if (worker.machine.state() == Worker::State::stopped)
        stop_worker(worker);
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
    if (w != workers_.end() && w->second->machine.state() == Worker::State::stopped &&
        should_run(*w->second))
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
  ctx_.waiting_requests(0);
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
  reconnect_.closed();
  if (done) done();
}

void Connection::shutdown() {
  if (dead_) return;
  dead_ = true;
  closing_ = true;
  reconnect_.cancel();
  // Whatever is left completes now, exactly once (the core's own deadline may have won).
  for (auto& [key, slot] : requests_) {
    auto done = std::move(slot->done);
    slot->done = OpCompletion();
    if (done) done(make_error_code(errc::closed), {}, "client closed");
  }
  for (auto& work : waiting_) work.done(make_error_code(errc::closed), {}, "client closed");
  waiting_.clear();
  ctx_.waiting_requests(0);
  idle_requests_.clear();
  serves_.clear();  // drops the sinks (the core's subscriptions)
  // The exchanges' completions find nothing from here on (dead_).
  if (socket_) socket_->close();
  requests_.clear();
  workers_.clear();
}

}  // namespace polybus::memodb::detail
