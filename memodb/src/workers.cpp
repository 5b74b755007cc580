// SPDX-License-Identifier: Apache-2.0
#include "workers.hpp"

#include <algorithm>

#include "connection.hpp"
#include "polybus/error.hpp"

namespace polybus::memodb::detail {

using polybus::errc;

namespace {

// The exchange was ended on purpose (cancel, close): nothing to report.
bool cancelled(std::error_code ec) {
  return ec == make_error_code(errc::closed);
}

}  // namespace

std::chrono::milliseconds Workers::resend_time() const {
  const auto& settings = connection_.settings_;
  return settings.heartbeat_interval + settings.heartbeat_timeout + kResendMargin;
}

std::uint64_t Workers::serve(const std::string& service, std::uint32_t workers,
                             std::shared_ptr<SubscriptionSink> sink) {
  if (auto ec = validate_service(service))
    throw Error(make_error_code(errc::invalid_argument),
                "memodb: service name '" + service + "': " + ec.message());
  if (connection_.closing_) throw Error(make_error_code(errc::closed), "memodb: client closed");
  const std::uint64_t id = ++next_serve_;
  auto& record = serves_[id];
  record.service = service;
  record.sink = std::move(sink);
  record.target = workers;
  for (std::uint32_t i = 0; i < record.target; ++i)
    if (WorkerSlot* worker = add(id, record)) start(*worker);
  return id;
}

Workers::WorkerSlot* Workers::add(std::uint64_t serve_id, ServeRecord& serve) {
  auto worker = std::make_unique<WorkerSlot>(++next_key_);
  worker->serve = serve_id;
  worker->machine = Worker(serve.service);
  WorkerSlot* raw = worker.get();
  serve.workers.push_back(raw->key);
  slots_.emplace(raw->key, std::move(worker));
  return raw;
}

bool Workers::should_run(const WorkerSlot& worker) const {
  if (connection_.closing_ || worker.retire) return false;
  auto it = serves_.find(worker.serve);
  return it != serves_.end() && !it->second.gone && !it->second.paused;
}

std::string Workers::describe(const WorkerSlot& worker) const {
  auto it = serves_.find(worker.serve);
  return "memodb worker for '" + (it == serves_.end() ? std::string("?") : it->second.service) +
         "'";
}

void Workers::start(WorkerSlot& worker) {
  auto it = serves_.find(worker.serve);
  if (it == serves_.end()) return stop(worker);
  std::string header;
  if (auto ec = worker.machine.ready(header)) {
    connection_.ctx_.error(ec, describe(worker) + ": cannot build READY: " + ec.message());
    return stop(worker);
  }
  send(worker, std::move(header), false);
}

void Workers::send(WorkerSlot& worker, std::string message, bool result) {
  // READY and a HEARTBEAT's answer wait at most heartbeat_interval for the broker's answer:
  // resending sooner would register a phantom worker. A RESULT is never resent, neither on
  // this connection nor on the next: memo01's RESULT names only the worker, so one the broker
  // had taken (its answer, the next JOB, lost with the connection or held up on a stalled
  // link) would hand the old result to the next job's requester. Unanswered past the resend
  // time, or cut off with its connection, the worker registers afresh instead.
  worker.pending = true;
  const std::uint64_t key = worker.key;
  worker.exchange = connection_.socket_->exchange(
      std::move(message), result ? std::chrono::milliseconds(0) : resend_time(),
      result ? resend_time() : std::chrono::milliseconds(0),
      [weak = connection_.weak_from_this(), key] {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        auto& workers = self->workers_;
        if (auto it = workers.slots_.find(key); it != workers.slots_.end())
          workers.sent(*it->second);
      },
      [weak = connection_.weak_from_this(), key](std::error_code ec, std::string reply,
                                                 std::string detail) {
        auto self = weak.lock();
        if (!self || self->dead_) return;
        auto& workers = self->workers_;
        if (auto it = workers.slots_.find(key); it != workers.slots_.end())
          workers.completed(*it->second, ec, std::move(reply), std::move(detail));
      });
}

void Workers::sent(WorkerSlot& worker) {
  if (worker.machine.state() != Worker::State::sending) return;
  if (!worker.machine.sent(connection_.closing_)) {
    // Closing, and this was not the worker's leaving RESULT: it waits for no answer.
    return connection_.socket_->cancel(worker.exchange, make_error_code(errc::closed),
                                       "client closed");
  }
  auto it = serves_.find(worker.serve);
  if (it != serves_.end() && !it->second.confirmed && it->second.sink) {
    // The READY reached the broker's connection: the best confirmation memo01 gives (the
    // broker's first answer can be a HEARTBEAT a whole heartbeat interval later).
    it->second.confirmed = true;
    it->second.sink->ready({});
  }
}

void Workers::completed(WorkerSlot& worker, std::error_code ec, std::string reply,
                        std::string detail) {
  worker.pending = false;
  worker.exchange = 0;
  auto& ctx = connection_.ctx_;
  if (ec) {
    if (cancelled(ec) || connection_.closing_) return stop(worker);
    // The connection dropped under the exchange, or the broker never answered a RESULT: the
    // worker registers afresh rather than stopping for good. The broker times out a job it may
    // have handed it meanwhile.
    ctx.log(LogLevel::debug, describe(worker) + ": " + detail + "; registering afresh");
    worker.machine.stop();
    return restart_or_stop(worker);
  }
  if (worker.machine.state() == Worker::State::sending) {
    // The answer came before the write's completion was seen: the write was done.
    sent(worker);
    if (worker.machine.state() != Worker::State::receiving) return stop(worker);
  }
  connection_.reconnect_.proven();  // the broker answered: the backoff starts over
  auto message = std::make_shared<const std::string>(std::move(reply));
  auto step = worker.machine.received(*message, should_run(worker));
  if (step.ec) {
    // What follows is the machine's decision: a worker that is leaving does not register again.
    const bool stops = step.next == Worker::Next::stop;
    ctx.error(step.ec, describe(worker) + ": " + step.why +
                           (stops ? "; the worker stops" : "; registering again"));
  }
  switch (step.next) {
    case Worker::Next::handle:
      return on_job(worker, step.service, step.payload, std::move(message));
    case Worker::Next::send:
      // Registered: the broker knows the worker, so a later DISCONNECT starts the backoff over.
      if (worker.reregister) worker.reregister->succeeded();
      return send(worker, std::move(step.out), false);
    case Worker::Next::register_again:
      return restart_or_stop(worker);
    case Worker::Next::stop:
      return stop(worker);
    case Worker::Next::register_again_later:
      return register_again_later(worker);
  }
}

void Workers::register_again_later(WorkerSlot& worker) {
  // READY again after the reconnect policy's delay: a broker answering every READY with
  // DISCONNECT must not get thousands a second.
  auto& ctx = connection_.ctx_;
  if (!worker.reregister)
    worker.reregister = std::make_unique<Reconnector>(ctx.strand(), ctx.backoff(), ctx.clock());
  const std::uint64_t key = worker.key;
  auto delay = worker.reregister->schedule([weak = connection_.weak_from_this(), key] {
    auto self = weak.lock();
    if (!self || self->dead_) return;
    auto& workers = self->workers_;
    auto found = workers.slots_.find(key);
    if (found == workers.slots_.end()) return;
    WorkerSlot& w = *found->second;
    if (w.machine.state() == Worker::State::stopped && !w.pending) workers.restart_or_stop(w);
  });
  ctx.log(LogLevel::debug, describe(worker) + ": DISCONNECT from the broker; READY again in " +
                               std::to_string(delay.count()) + "ms");
}

void Workers::on_job(WorkerSlot& worker, std::string_view service, std::string_view payload,
                     std::shared_ptr<const std::string> message) {
  if (worker.reregister) worker.reregister->succeeded();
  auto it = serves_.find(worker.serve);
  auto& ctx = connection_.ctx_;
  if (connection_.closing_ || it == serves_.end() || it->second.gone || !it->second.sink) {
    ctx.log(LogLevel::warn, describe(worker) +
                                ": a JOB arrived while closing or after unsubscribe; it is "
                                "dropped and its requester will time out");
    return stop(worker);
  }
  ++worker.job_seq;
  auto state = ctx.make_message(connection_.weak_from_this());
  state->topic = std::string(service);
  state->payload = payload;
  state->buffer = std::move(message);  // payload is a view into it
  state->expects_reply = true;
  state->adapter_token = (worker.key << 32) | worker.job_seq;
  it->second.sink->deliver(Message(std::move(state)));
}

void Workers::reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
                    std::string detail) {
  auto it = slots_.find(message.adapter_token >> 32);
  if (it == slots_.end()) return;
  WorkerSlot& worker = *it->second;
  if (worker.machine.state() != Worker::State::handling ||
      worker.job_seq != static_cast<std::uint32_t>(message.adapter_token & 0xffffffffu))
    return;
  auto& ctx = connection_.ctx_;
  if (ec) {
    // memo01 has no error reply: the broker hands the requester only a RESULT payload. Without
    // one, the broker gives up on the job after its timeout and the requester times out.
    ctx.log(LogLevel::warn, describe(worker) + ": no RESULT sent (" +
                                (detail.empty() ? ec.message() : detail) +
                                "); the requester will time out");
    return restart_or_stop(worker);
  }
  // Leaving (paused, unsubscribed, retired or closing): the last RESULT says so, and the
  // broker answers DISCONNECT instead of another job.
  std::string result;
  if (auto result_ec = worker.machine.result(result, !should_run(worker))) {
    ctx.error(result_ec, describe(worker) + ": cannot build RESULT: " + result_ec.message());
    worker.machine.stop();
    return restart_or_stop(worker);
  }
  result.append(payload);
  ctx.count_bytes_out(payload.size());
  send(worker, std::move(result), true);
}

void Workers::restart_or_stop(WorkerSlot& worker) {
  if (should_run(worker)) return start(worker);
  stop(worker);
}

void Workers::stop(WorkerSlot& worker) {
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
    slots_.erase(key);  // worker is gone from here on
  }
  connection_.maybe_finish_close();
}

void Workers::unsubscribe(std::uint64_t serve) {
  auto it = serves_.find(serve);
  if (it == serves_.end() || it->second.gone) return;
  it->second.gone = true;
  it->second.sink.reset();
  const auto keys = it->second.workers;
  for (auto key : keys) {
    auto w = slots_.find(key);
    if (w == slots_.end()) continue;
    WorkerSlot& worker = *w->second;
    if (worker.pending && !worker.machine.leaving())
      connection_.cancel(worker);  // its completion stops it
    else if (worker.machine.state() == Worker::State::stopped)
      stop(worker);
    // A worker handling a job sends its RESULT (with disconnecting) and then leaves.
  }
}

void Workers::set_paused(std::uint64_t serve, bool paused) {
  auto it = serves_.find(serve);
  if (it == serves_.end() || it->second.gone || it->second.paused == paused) return;
  it->second.paused = paused;
  // Pausing is passive: a waiting worker still takes the job the broker may already have
  // chosen it for, then says it is leaving; one that gets a HEARTBEAT stops without answering.
  if (paused) return;
  const auto keys = it->second.workers;
  for (auto key : keys) {
    auto w = slots_.find(key);
    if (w != slots_.end() && w->second->machine.state() == Worker::State::stopped &&
        should_run(*w->second))
      start(*w->second);
  }
}

void Workers::set_workers(std::uint64_t serve, std::uint32_t count) {
  auto it = serves_.find(serve);
  if (it == serves_.end() || it->second.gone) return;
  it->second.target = count;
  std::vector<WorkerSlot*> active;
  for (auto key : it->second.workers) {
    auto w = slots_.find(key);
    if (w != slots_.end() && !w->second->retire) active.push_back(w->second.get());
  }
  if (active.size() < count) {
    for (std::size_t n = active.size(); n < count; ++n) {
      WorkerSlot* worker = add(serve, it->second);
      if (worker && should_run(*worker)) start(*worker);
    }
    return;
  }
  // Retire the surplus, stopped workers first; the others leave as a pause makes them.
  std::stable_partition(active.begin(), active.end(), [](const WorkerSlot* w) {
    return w->machine.state() == Worker::State::stopped;
  });
  for (std::size_t n = 0; n < active.size() - count; ++n) {
    active[n]->retire = true;
    if (active[n]->machine.state() == Worker::State::stopped) stop(*active[n]);
  }
}

void Workers::close() {
  // Workers whose last RESULT is on its way get until the deadline for the broker's DISCONNECT;
  // the others stop now. An idle worker's registration then lingers at the broker until its
  // heartbeat fails (the real broker's behaviour; a job handed to it meanwhile times out).
  for (auto& [key, worker] : slots_)
    if (!worker->machine.leaving()) connection_.cancel(*worker);
}

void Workers::shutdown() {
  serves_.clear();
  slots_.clear();
}

bool Workers::exchanging() const {
  return any_pending(slots_);
}

}  // namespace polybus::memodb::detail
