// SPDX-License-Identifier: Apache-2.0
// The MemoDB test broker's memo01: READY registers a worker for its services, a JOB goes to the
// worker of its service that has waited longest (or waits queued up to queue_timeout), RESULT
// goes back to the requester, HEARTBEAT and DISCONNECT keep and end workers, as the real broker
// (memo01) does.
#include "broker.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <optional>

#include "journal_and_faults.hpp"
#include "polybus/memodb/codec.hpp"

namespace polybus::memodb::testing {

namespace {

std::string worker_id(std::uint32_t n) {
  std::string id(4, '\0');
  for (int i = 0; i < 4; ++i)
    id[static_cast<std::size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
  return id;
}

}  // namespace

void BrokerImpl::reply(std::uint64_t key, const MessageUnit& sent, const std::string& header,
                       std::string_view payload) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return;
  Request request = std::move(it->second);
  requests_.erase(it);
  if (auto c = connections_.find(request.connection); c != connections_.end()) {
    for (int copy = request.duplicate ? 2 : 1; copy > 0; --copy) {
      if (journal_.enabled()) {
        MessageUnit unit = sent;
        unit.bytes = payload.size();
        journal_message(journal_, request.connection, false, unit);
      }
      c->second->send(request.backtrace, header, payload);
    }
    c->second->released(request.bytes);
  }
}

std::shared_ptr<Session> BrokerImpl::connection_of(std::uint64_t key) const {
  auto it = requests_.find(key);
  if (it == requests_.end()) return nullptr;
  auto c = connections_.find(it->second.connection);
  return c == connections_.end() ? nullptr : c->second;
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

void BrokerImpl::disconnect(std::uint64_t key, std::string_view id, std::string_view why) {
  std::string header;
  if (append_disconnect(header, id)) return drop(key);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.disconnects;
  }
  MessageUnit sent{to_string(MessageType::disconnect)};
  sent.worker_id = id;
  sent.text = why;
  reply(key, sent, header);
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
  if (journal_.enabled() || !faults_.empty()) return act_with_faults(key, header, payload);
  act(key, header, payload);
}

void BrokerImpl::act(std::uint64_t key, const Header& header, std::string_view payload) {
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
      w.timer = std::make_unique<ClockTimer>(io_.context());
      w.job_timer = std::make_unique<ClockTimer>(io_.context(), options_.clock);
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.registrations;
      }
      return waiting(w);
    }
    case MessageType::job: {
      // Counted once the job is with a worker or waits on its timer: a test that sees the count
      // and then moves a manual clock moves it past the queue_timeout the job already has.
      const auto counted = [this] {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.jobs;
      };
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
          idle != idle_by_service_.end() && !idle->second.empty()) {
        dispatch(workers_.at(idle->second.begin()->second), jobs_.find(seq));
        return counted();
      }
      job.timer = std::make_unique<ClockTimer>(io_.context(), options_.clock);
      job.timer->expires_after(options_.queue_timeout);
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
      return counted();
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
      MessageUnit sent{to_string(MessageType::result)};
      sent.topic = w.job_service;
      reply(w.client, sent, out, payload);  // the disconnecting flag is not passed on
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

// ---- journal and faults ----

void BrokerImpl::act_with_faults(std::uint64_t key, const Header& header,
                                 std::string_view payload) {
  using Action = polybus::testing::FaultRule::Action;
  auto request = requests_.find(key);
  if (request == requests_.end()) return;
  const std::uint64_t connection = request->second.connection;
  auto worker =
      header.type == MessageType::ready ? workers_.end() : workers_.find(std::string(header.id));
  const bool known = worker != workers_.end();
  std::string topic;
  if (header.type == MessageType::ready) {
    topic = joined(header.services);
  } else if (header.type == MessageType::job) {
    topic = header.service;
  } else if (known) {
    topic = header.type == MessageType::result ? worker->second.job_service
                                               : joined(worker->second.services);
  }
  MessageUnit unit{to_string(header.type)};
  unit.topic = topic;
  unit.worker_id = header.id;
  unit.bytes = payload.size();
  if (header.type == MessageType::job) unit.count = static_cast<std::int64_t>(header.timeout_ms);
  if (journal_.enabled()) journal_message(journal_, connection, true, unit);
  if (faults_.empty()) return act(key, header, payload);
  const auto fault = faults_.fire({unit.kind, topic, {}, connection});
  if (!fault) return act(key, header, payload);
  switch (fault->action) {
    case Action::error: {
      // memo01's one refusal is DISCONNECT (the rule's text is the journal's only): a worker it
      // names is let go, as for any DISCONNECT the broker sends, and a client's JOB is not run.
      const auto session = fault->fatal ? connection_of(key) : nullptr;
      if (known) forget(std::string(header.id));
      disconnect(key, header.id, fault->error);
      if (session) session->end_when_written();
      return;
    }
    case Action::swallow:
      return drop(key);
    case Action::delay:
      if (auto session = connection_of(key)) session->hold_output(fault->delay);
      return act(key, header, payload);
    case Action::hold:
      if (auto session = connection_of(key)) {
        session->hold_output(std::chrono::hours(24 * 365));  // until the rule is removed
        faults_.when_removed(fault->id, connection,
                             [weak = std::weak_ptr(session), &io = io_.context()] {
                               asio::post(io, [weak] {
                                 if (const auto held = weak.lock())
                                   held->hold_output(std::chrono::milliseconds(0));
                               });
                             });
      }
      return act(key, header, payload);
    case Action::close:
    case Action::reset: {
      const auto session = connection_of(key);
      drop(key);
      if (session) session->end(fault->action == Action::reset);
      return;
    }
    case Action::duplicate:
      if (header.type == MessageType::job) {
        // Queued twice: run twice, the requester answered by the first RESULT.
        act(key, header, payload);
        return act(key, header, payload);
      }
      if (header.type == MessageType::result && known &&
          worker->second.state == Worker::State::busy) {
        // Its RESULT is handed to the requester twice.
        if (auto client = requests_.find(worker->second.client); client != requests_.end())
          client->second.duplicate = true;
      } else {
        request->second.duplicate = true;  // the answer to it is written twice
      }
      return act(key, header, payload);
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
  MessageUnit sent{to_string(MessageType::job)};
  sent.topic = job.service;
  sent.worker_id = w.id;
  sent.count = static_cast<std::int64_t>(job.timeout_ms);
  reply(held, sent, header, job.payload);
  arm(w, std::chrono::milliseconds(std::min<std::uint64_t>(job.timeout_ms, 24ull * 3'600'000)),
      &BrokerImpl::worker_timed_out, true);
}

void BrokerImpl::arm(Worker& w, std::chrono::milliseconds after,
                     void (BrokerImpl::*fn)(const std::string&), bool on_clock) {
  const std::uint64_t gen = ++w.timer_gen;  // the other timer's wait, if any, is stale now
  ClockTimer& timer = on_clock ? *w.job_timer : *w.timer;
  timer.expires_after(after);
  timer.async_wait([this, id = w.id, gen, fn](std::error_code ec) {
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
  MessageUnit sent{to_string(MessageType::heartbeat)};
  sent.worker_id = w.id;
  reply(held, sent, header);
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
  if (w.job_timer) w.job_timer->cancel();
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

}  // namespace polybus::memodb::testing
