// SPDX-License-Identifier: Apache-2.0
#include "broker.hpp"

#include <algorithm>

#include "polybus/error.hpp"

namespace polybus::mem {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
std::error_code err(errc e) {
  return make_error_code(e);
}
}  // namespace

BrokerImpl::BrokerImpl() : timer_thread_([this] { timer_loop(); }) {}

BrokerImpl::~BrokerImpl() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
  }
  timer_wake_.notify_all();
  timer_thread_.join();
}

std::uint64_t BrokerImpl::connect(SessionCallbacks callbacks,
                                  std::chrono::milliseconds msg_timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!running_) return 0;
  std::uint64_t id = ++next_id_;
  sessions_.emplace(id, Session{std::move(callbacks), msg_timeout});
  ++sessions_accepted_;
  return id;
}

void BrokerImpl::disconnect(std::uint64_t session) {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_session_locked(session, false);
}

bool BrokerImpl::alive(std::uint64_t session) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sessions_.count(session) != 0;
}

BrokerImpl::Topic& BrokerImpl::topic_locked(const std::string& name) {
  auto& slot = topics_[name];
  if (!slot) {
    slot = std::make_unique<Topic>();
    slot->name = name;
  }
  return *slot;
}

void BrokerImpl::append_locked(Topic& topic, std::shared_ptr<const std::string> payload) {
  topic.log.push_back(Stored{std::move(payload), now_ns()});
  ++stats_.published;
  ++topic.published;
  while (topic.log.size() > retention_) {
    topic.log.pop_front();
    ++topic.base;
  }
}

std::error_code BrokerImpl::publish(std::uint64_t session, const std::string& topic_name,
                                    Payloads& payloads, std::chrono::milliseconds defer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sessions_.count(session)) return err(errc::disconnected);
  int copies = 1;
  if (observer_) {
    std::size_t bytes = 0;
    for (const auto& payload : payloads) bytes += payload.size();
    const BrokerFault fault = observe_locked({session,
                                              true,
                                              "publish",
                                              topic_name,
                                              {},
                                              0,
                                              static_cast<std::int64_t>(payloads.size()),
                                              bytes});
    bool done = false;
    if (const auto ec = fault_on_request_locked(session, fault, done); ec || done) return ec;
    if (fault.action == BrokerFault::Action::duplicate) copies = 2;
  }
  Topic& topic = topic_locked(topic_name);
  if (defer.count() > 0) {
    auto at = now_locked() + defer;
    for (auto& payload : payloads) {
      auto stored = std::make_shared<const std::string>(std::move(payload));
      for (int i = 0; i < copies; ++i)  // a duplicate fault: stored twice
        schedule_locked(Timer{at, TimerKind::deferred_publish, 0, topic_name, stored});
    }
    return {};
  }
  for (auto& payload : payloads) {
    auto stored = std::make_shared<const std::string>(std::move(payload));
    for (int i = 0; i < copies; ++i) append_locked(topic, stored);
  }
  for (auto& [name, group] : topic.groups) dispatch_locked(*group);
  return {};
}

BrokerImpl::Member* BrokerImpl::member_locked(Group& group, std::uint64_t session,
                                              std::uint64_t sub) {
  for (auto& m : group.members)
    if (m.session == session && m.sub == sub) return &m;
  return nullptr;
}

std::error_code BrokerImpl::subscribe(std::uint64_t session, std::uint64_t sub,
                                      const std::string& topic_name, const std::string& group_name,
                                      std::optional<std::uint64_t> from,
                                      std::uint32_t max_in_flight) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sessions_.count(session)) return err(errc::disconnected);
  if (observer_) {
    const BrokerFault fault = observe_locked({session, true, "subscribe", topic_name, group_name, 0,
                                              static_cast<std::int64_t>(max_in_flight), 0});
    bool done = false;
    const auto ec = fault_on_request_locked(session, fault, done);
    // A session closed under a subscribe is not a refusal: the client subscribes again on its
    // next session, as after any disconnect.
    if (fault.action == BrokerFault::Action::close) return {};
    if (ec || done) return ec;
  }
  Topic& topic = topic_locked(topic_name);
  auto& slot = topic.groups[group_name];
  if (!slot) {
    slot = std::make_unique<Group>();
    slot->id = ++next_id_;
    slot->name = group_name;
    slot->topic = &topic;
    slot->anonymous = !group_name.empty() && group_name[0] == '~';
    slot->cursor = from ? std::clamp(*from, topic.base, topic.end()) : topic.end();
    groups_by_id_[slot->id] = slot.get();
  }
  Group& group = *slot;
  if (member_locked(group, session, sub)) return err(errc::already_subscribed);
  group.members.push_back(Member{session, sub, max_in_flight});
  dispatch_locked(group);
  return {};
}

std::error_code BrokerImpl::unsubscribe(std::uint64_t session, std::uint64_t sub,
                                        bool delete_group) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [tname, topic] : topics_) {
    auto& responders = topic->responders;
    responders.erase(
        std::remove_if(responders.begin(), responders.end(),
                       [&](const Member& m) { return m.session == session && m.sub == sub; }),
        responders.end());
    for (auto it = topic->groups.begin(); it != topic->groups.end();) {
      Group& group = *it->second;
      auto& members = group.members;
      auto before = members.size();
      members.erase(
          std::remove_if(members.begin(), members.end(),
                         [&](const Member& m) { return m.session == session && m.sub == sub; }),
          members.end());
      if (members.size() != before) {
        // Its unacknowledged messages go back to the group.
        std::vector<std::uint64_t> mine;
        for (auto& [id, f] : group.in_flight)
          if (f.session == session && f.sub == sub) mine.push_back(id);
        for (auto id : mine) requeue_locked(group, id, std::chrono::milliseconds(0));
        if (delete_group && members.empty()) {
          for (auto& [id, f] : group.in_flight) delivery_group_.erase(id);
          groups_by_id_.erase(group.id);
          it = topic->groups.erase(it);
          continue;
        }
        dispatch_locked(group);
      }
      ++it;
    }
  }
  return {};
}

std::error_code BrokerImpl::set_max_in_flight(std::uint64_t session, std::uint64_t sub,
                                              std::uint32_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [tname, topic] : topics_) {
    for (auto& [gname, group] : topic->groups) {
      if (Member* m = member_locked(*group, session, sub)) {
        m->max_in_flight = n;
        dispatch_locked(*group);
      }
    }
    for (auto& m : topic->responders)
      if (m.session == session && m.sub == sub) {
        m.max_in_flight = n;
        dispatch_requests_locked(*topic);
      }
  }
  return {};
}

void BrokerImpl::requeue_locked(Group& group, std::uint64_t delivery,
                                std::chrono::milliseconds delay) {
  auto it = group.in_flight.find(delivery);
  if (it == group.in_flight.end()) return;
  InFlight f = it->second;
  group.in_flight.erase(it);
  delivery_group_.erase(delivery);
  if (Member* m = member_locked(group, f.session, f.sub))
    if (m->in_flight > 0) --m->in_flight;
  Pending p{f.offset, f.attempts};
  if (delay.count() <= 0) {
    // Keep redeliveries in offset order so that a single consumer sees them in order.
    auto pos =
        std::upper_bound(group.ready.begin(), group.ready.end(), p,
                         [](const Pending& a, const Pending& b) { return a.offset < b.offset; });
    group.ready.insert(pos, p);
  } else {
    auto at = now_locked() + delay;
    group.delayed.emplace(at, p);
    schedule_locked(Timer{at, TimerKind::delayed_ready, group.id, {}, nullptr});
  }
}

void BrokerImpl::dispatch_locked(Group& group) {
  Topic& topic = *group.topic;
  while (!group.members.empty()) {
    Member* member = nullptr;
    for (std::size_t i = 0; i < group.members.size(); ++i) {
      Member& m = group.members[(group.next_member + i) % group.members.size()];
      if (m.in_flight < m.max_in_flight) {
        member = &m;
        group.next_member = (group.next_member + i + 1) % group.members.size();
        break;
      }
    }
    if (!member) return;
    Pending next{};
    if (!group.ready.empty()) {
      next = group.ready.front();
      group.ready.pop_front();
    } else if (group.cursor < topic.end()) {
      next = Pending{group.cursor++, 0};
    } else {
      return;
    }
    if (next.offset < topic.base) continue;  // dropped by retention meanwhile
    auto session = sessions_.find(member->session);
    if (session == sessions_.end()) continue;  // cannot happen: sessions leave their groups
    const Stored& stored = topic.log[next.offset - topic.base];
    std::uint64_t id = ++next_id_;
    auto deadline = now_locked() + session->second.msg_timeout;
    group.in_flight.emplace(
        id, InFlight{next.offset, next.attempts + 1, member->session, member->sub, deadline});
    delivery_group_[id] = &group;
    ++member->in_flight;
    ++stats_.delivered;
    ++group.delivered;
    if (next.attempts > 0) {
      ++stats_.redelivered;
      ++group.redelivered;
    }
    schedule_locked(Timer{deadline, TimerKind::ack_timeout, id, {}, nullptr});
    const Delivery delivery{
        member->sub,         id,   next.offset, stored.payload, next.attempts + 1,
        stored.timestamp_ns, false};
    if (observer_)
      hand_over_locked(member->session, delivery, topic.name, group.name);
    else
      session->second.callbacks.deliver(delivery);
  }
}

std::error_code BrokerImpl::ack(std::uint64_t session, std::uint64_t delivery) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (observer_) {
    bool done = false;
    const BrokerFault fault = observe_locked(settle_observed(session, "ack", delivery, -1));
    if (const auto ec = fault_on_request_locked(session, fault, done); ec || done) return ec;
  }
  auto g = delivery_group_.find(delivery);
  if (g == delivery_group_.end()) return err(errc::broker_error);  // timed out and requeued
  Group& group = *g->second;
  auto it = group.in_flight.find(delivery);
  if (it == group.in_flight.end() || it->second.session != session) return err(errc::broker_error);
  if (Member* m = member_locked(group, it->second.session, it->second.sub))
    if (m->in_flight > 0) --m->in_flight;
  group.in_flight.erase(it);
  delivery_group_.erase(g);
  ++stats_.acked;
  ++group.acked;
  dispatch_locked(group);
  return {};
}

std::error_code BrokerImpl::nack(std::uint64_t session, std::uint64_t delivery,
                                 std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (observer_) {
    bool done = false;
    const BrokerFault fault =
        observe_locked(settle_observed(session, "nack", delivery, delay.count()));
    if (const auto ec = fault_on_request_locked(session, fault, done); ec || done) return ec;
  }
  auto g = delivery_group_.find(delivery);
  if (g == delivery_group_.end()) return err(errc::broker_error);
  Group& group = *g->second;
  auto it = group.in_flight.find(delivery);
  if (it == group.in_flight.end() || it->second.session != session) return err(errc::broker_error);
  requeue_locked(group, delivery, delay);
  dispatch_locked(group);
  return {};
}

std::error_code BrokerImpl::touch(std::uint64_t session, std::uint64_t delivery) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (observer_) {
    bool done = false;
    const BrokerFault fault = observe_locked(settle_observed(session, "touch", delivery, -1));
    if (const auto ec = fault_on_request_locked(session, fault, done); ec || done) return ec;
  }
  auto g = delivery_group_.find(delivery);
  if (g == delivery_group_.end()) return err(errc::broker_error);
  auto it = g->second->in_flight.find(delivery);
  auto s = sessions_.find(session);
  if (it == g->second->in_flight.end() || it->second.session != session || s == sessions_.end())
    return err(errc::broker_error);
  it->second.deadline = now_locked() + s->second.msg_timeout;
  schedule_locked(Timer{it->second.deadline, TimerKind::ack_timeout, delivery, {}, nullptr});
  return {};
}

std::error_code BrokerImpl::serve(std::uint64_t session, std::uint64_t sub,
                                  const std::string& topic_name, std::uint32_t max_in_flight) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sessions_.count(session)) return err(errc::disconnected);
  Topic& topic = topic_locked(topic_name);
  topic.responders.push_back(Member{session, sub, std::max<std::uint32_t>(1, max_in_flight)});
  dispatch_requests_locked(topic);
  return {};
}

std::error_code BrokerImpl::request(std::uint64_t session, std::uint64_t request_id,
                                    const std::string& topic_name, const std::string& payload) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sessions_.count(session)) return err(errc::disconnected);
  if (observer_) {
    bool done = false;
    const BrokerFault fault =
        observe_locked({session, true, "request", topic_name, {}, 0, -1, payload.size()});
    if (const auto ec = fault_on_request_locked(session, fault, done); ec || done) return ec;
  }
  Topic& topic = topic_locked(topic_name);
  if (topic.responders.empty()) return err(errc::no_responder);
  ++topic.published;
  topic.requests.push_back(
      QueuedRequest{session, request_id, std::make_shared<const std::string>(payload)});
  dispatch_requests_locked(topic);
  return {};
}

void BrokerImpl::dispatch_requests_locked(Topic& topic) {
  while (!topic.requests.empty() && !topic.responders.empty()) {
    Member* responder = nullptr;
    for (std::size_t i = 0; i < topic.responders.size(); ++i) {
      Member& m = topic.responders[(topic.next_responder + i) % topic.responders.size()];
      if (m.in_flight < m.max_in_flight) {
        responder = &m;
        topic.next_responder = (topic.next_responder + i + 1) % topic.responders.size();
        break;
      }
    }
    if (!responder) return;
    QueuedRequest req = std::move(topic.requests.front());
    topic.requests.pop_front();
    if (!sessions_.count(req.session)) continue;  // the requester left
    std::uint64_t id = ++next_id_;
    open_requests_.emplace(
        id, OpenRequest{req.session, req.request_id, responder->session, responder->sub, &topic});
    ++responder->in_flight;
    ++topic.requests_delivered;
    const Delivery delivery{responder->sub, id, 0, req.payload, 1, now_ns(), true};
    if (observer_)
      hand_over_locked(responder->session, delivery, topic.name, {});
    else
      sessions_.at(responder->session).callbacks.deliver(delivery);
  }
}

std::error_code BrokerImpl::reply(std::uint64_t session, std::uint64_t delivery,
                                  std::string payload, std::error_code ec, std::string detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (observer_) {
    bool done = false;
    const BrokerFault fault =
        observe_locked({session, true, "reply", {}, {}, delivery, -1, payload.size()});
    if (const auto refused = fault_on_request_locked(session, fault, done); refused || done)
      return refused;
  }
  auto it = open_requests_.find(delivery);
  if (it == open_requests_.end() || it->second.responder != session) return err(errc::broker_error);
  OpenRequest open = it->second;
  open_requests_.erase(it);
  ++open.topic->requests_answered;
  for (auto& m : open.topic->responders)
    if (m.session == open.responder && m.sub == open.sub && m.in_flight > 0) --m.in_flight;
  auto requester = sessions_.find(open.requester);
  if (requester != sessions_.end())
    requester->second.callbacks.reply(open.request_id, ec, std::move(payload), std::move(detail));
  dispatch_requests_locked(*open.topic);
  return {};
}

void BrokerImpl::drop_session_locked(std::uint64_t session, bool notify) {
  auto s = sessions_.find(session);
  if (s == sessions_.end()) return;
  for (auto& [tname, topic] : topics_) {
    auto& responders = topic->responders;
    responders.erase(std::remove_if(responders.begin(), responders.end(),
                                    [&](const Member& m) { return m.session == session; }),
                     responders.end());
    for (auto& [gname, group] : topic->groups) {
      std::vector<std::uint64_t> mine;
      for (auto& [id, f] : group->in_flight)
        if (f.session == session) mine.push_back(id);
      for (auto id : mine) requeue_locked(*group, id, std::chrono::milliseconds(0));
      auto& members = group->members;
      members.erase(std::remove_if(members.begin(), members.end(),
                                   [&](const Member& m) { return m.session == session; }),
                    members.end());
    }
  }
  SessionCallbacks callbacks = std::move(s->second.callbacks);
  sessions_.erase(s);
  // Requests this session was answering fail now rather than at their deadline.
  for (auto it = open_requests_.begin(); it != open_requests_.end();) {
    if (it->second.responder == session) {
      auto requester = sessions_.find(it->second.requester);
      if (requester != sessions_.end())
        requester->second.callbacks.reply(it->second.request_id, err(errc::disconnected), {},
                                          "the responder disconnected");
      it = open_requests_.erase(it);
    } else if (it->second.requester == session) {
      it = open_requests_.erase(it);  // its reply has nowhere to go; the responder still answers
    } else {
      ++it;
    }
  }
  for (auto& [tname, topic] : topics_) {
    for (auto& [gname, group] : topic->groups) dispatch_locked(*group);
    dispatch_requests_locked(*topic);
  }
  if (notify && callbacks.disconnected) callbacks.disconnected();
}

BrokerEvent BrokerImpl::settle_observed(std::uint64_t session, std::string_view kind,
                                        std::uint64_t delivery, std::int64_t count) const {
  BrokerEvent observed{session, true, kind, {}, {}, delivery, count, 0};
  if (const auto g = delivery_group_.find(delivery); g != delivery_group_.end()) {
    observed.topic = g->second->topic->name;
    observed.group = g->second->name;
  }
  return observed;
}

std::error_code BrokerImpl::fault_on_request_locked(std::uint64_t session, const BrokerFault& fault,
                                                    bool& done) {
  using Action = BrokerFault::Action;
  switch (fault.action) {
    case Action::none:
    case Action::duplicate:  // the operation says what twice is
    case Action::delay:      // only deliveries are held
      return {};
    case Action::swallow:
      done = true;
      return {};
    case Action::error:
      if (fault.fatal) {
        done = true;
        drop_session_locked(session, true);
      }
      return err(errc::broker_error);
    case Action::close:
      done = true;
      drop_session_locked(session, true);
      return err(errc::disconnected);
  }
  return {};
}

void BrokerImpl::hand_over_locked(std::uint64_t session, const Delivery& delivery,
                                  std::string_view topic, std::string_view group) {
  using Action = BrokerFault::Action;
  const BrokerFault fault =
      observe_locked({session, false, delivery.request ? "request" : "deliver", topic, group,
                      delivery.delivery_id, static_cast<std::int64_t>(delivery.attempts),
                      delivery.payload ? delivery.payload->size() : 0});
  auto s = sessions_.find(session);
  if (s == sessions_.end()) return;
  switch (fault.action) {
    case Action::none:
      s->second.callbacks.deliver(delivery);
      return;
    case Action::duplicate:
      s->second.callbacks.deliver(delivery);
      s->second.callbacks.deliver(delivery);
      return;
    case Action::swallow:  // in flight, never handed over: it times out
      return;
    case Action::delay: {
      Timer later{now_locked() + fault.delay, TimerKind::deliver_later, 0, {}, nullptr};
      later.delivery = delivery;
      later.session = session;
      schedule_locked(std::move(later));
      return;
    }
    case Action::error:  // a delivery has no error to answer: the session goes, as for close
    case Action::close:
      // Not while the caller walks the group's members: just after, from the timer.
      schedule_locked(Timer{now_locked(), TimerKind::drop_session, session, {}, nullptr});
      return;
  }
}

void BrokerImpl::set_observer(BrokerObserver observer) {
  std::lock_guard<std::mutex> lock(mutex_);
  observer_ = std::move(observer);
}

void BrokerImpl::schedule_locked(Timer timer) {
  bool earliest = timers_.empty() || timer.at < timers_.top().at;
  if (clock_) {
    clock_->schedule(timer.at, [weak = weak_from_this()] {
      if (const auto self = weak.lock()) self->fire_due();
    });
  }
  timers_.push(std::move(timer));
  if (earliest) timer_wake_.notify_one();
}

void BrokerImpl::fire_due() {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = now_locked();
  while (!timers_.empty() && timers_.top().at <= now) {
    Timer timer = timers_.top();
    timers_.pop();
    fire_locked(timer);
  }
}

void BrokerImpl::set_clock(std::shared_ptr<ManualClock> clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  clock_ = std::move(clock);
  if (clock_) {  // what is pending comes due on the new clock
    auto pending = timers_;
    for (; !pending.empty(); pending.pop()) {
      clock_->schedule(pending.top().at, [weak = weak_from_this()] {
        if (const auto self = weak.lock()) self->fire_due();
      });
    }
  }
  timer_wake_.notify_one();
}

void BrokerImpl::timer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!shutting_down_) {
    if (clock_ || timers_.empty()) {  // on a ManualClock, its advance() fires them
      timer_wake_.wait(lock);
      continue;
    }
    auto at = timers_.top().at;
    if (now_locked() < at) {
      timer_wake_.wait_until(lock, at);
      continue;
    }
    Timer timer = timers_.top();
    timers_.pop();
    fire_locked(timer);
  }
}

void BrokerImpl::fire_locked(Timer& timer) {
  switch (timer.kind) {
    case TimerKind::ack_timeout: {
      auto g = delivery_group_.find(timer.group_or_delivery);
      if (g == delivery_group_.end()) return;
      Group& group = *g->second;
      auto it = group.in_flight.find(timer.group_or_delivery);
      if (it == group.in_flight.end() || it->second.deadline > now_locked()) return;  // touched
      requeue_locked(group, timer.group_or_delivery, std::chrono::milliseconds(0));
      dispatch_locked(group);
      return;
    }
    case TimerKind::delayed_ready: {
      auto g = groups_by_id_.find(timer.group_or_delivery);
      if (g == groups_by_id_.end()) return;
      Group& group = *g->second;
      auto now = now_locked();
      while (!group.delayed.empty() && group.delayed.begin()->first <= now) {
        Pending p = group.delayed.begin()->second;
        group.delayed.erase(group.delayed.begin());
        auto pos = std::upper_bound(
            group.ready.begin(), group.ready.end(), p,
            [](const Pending& a, const Pending& b) { return a.offset < b.offset; });
        group.ready.insert(pos, p);
      }
      dispatch_locked(group);
      return;
    }
    case TimerKind::deferred_publish: {
      Topic& topic = topic_locked(timer.topic);
      append_locked(topic, std::move(timer.payload));
      for (auto& [name, group] : topic.groups) dispatch_locked(*group);
      return;
    }
    case TimerKind::deliver_later: {
      auto s = sessions_.find(timer.session);
      if (s != sessions_.end() && timer.delivery) s->second.callbacks.deliver(*timer.delivery);
      return;
    }
    case TimerKind::drop_session:
      drop_session_locked(timer.group_or_delivery, true);
      return;
  }
}

void BrokerImpl::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  std::vector<std::uint64_t> ids;
  for (auto& [id, s] : sessions_) ids.push_back(id);
  for (auto id : ids) drop_session_locked(id, true);
}

void BrokerImpl::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = true;
}

bool BrokerImpl::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void BrokerImpl::set_retention(std::size_t messages) {
  std::lock_guard<std::mutex> lock(mutex_);
  retention_ = std::max<std::size_t>(1, messages);
}

BrokerStats BrokerImpl::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  BrokerStats s = stats_;
  s.connections = sessions_.size();
  return s;
}

metrics::BrokerMetrics BrokerImpl::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics::BrokerMetrics m;
  m.scheme = "mem";
  m.running = running_;
  m.connections = sessions_.size();
  m.connections_accepted = sessions_accepted_;
  std::map<const Topic*, std::uint64_t> open_requests;
  for (const auto& [id, open] : open_requests_) ++open_requests[open.topic];
  for (const auto& [name, topic] : topics_) {  // sorted by name, groups too
    m.topics.push_back({name, topic->published, topic->log.size()});
    if (!topic->responders.empty() || topic->requests_delivered > 0) {
      metrics::BrokerQueueMetrics q;  // serve() responders: group ""
      q.topic = name;
      q.delivered = topic->requests_delivered;
      q.acked = topic->requests_answered;
      q.queued = topic->requests.size();
      q.in_flight = open_requests[topic.get()];
      q.consumers = topic->responders.size();
      m.queues.push_back(std::move(q));
    }
    for (const auto& [group_name, group] : topic->groups) {
      metrics::BrokerQueueMetrics q;
      q.topic = name;
      q.group = group_name;
      q.delivered = group->delivered;
      q.redelivered = group->redelivered;
      q.acked = group->acked;
      const std::uint64_t unread = topic->end() - std::max(group->cursor, topic->base);
      q.queued = group->ready.size() + group->delayed.size() + unread;
      q.in_flight = group->in_flight.size();
      q.consumers = group->members.size();
      m.queues.push_back(std::move(q));
    }
  }
  return m;
}

std::uint64_t BrokerImpl::topic_size(const std::string& topic) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = topics_.find(topic);
  return it == topics_.end() ? 0 : it->second->log.size();
}

// ---- public handle ----

metrics::BrokerMetrics Broker::metrics() const {
  return impl_->metrics();
}

std::shared_ptr<Broker> Broker::get(const std::string& name) {
  static std::mutex mutex;
  static auto* brokers = new std::map<std::string, std::shared_ptr<Broker>>;  // process lifetime
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*brokers)[name];
  if (!slot) slot = std::make_shared<Broker>(std::make_shared<BrokerImpl>());
  return slot;
}

void Broker::restart() {
  impl_->stop();
  impl_->start();
}
void Broker::stop() {
  impl_->stop();
}
void Broker::start() {
  impl_->start();
}
bool Broker::running() const {
  return impl_->running();
}
void Broker::set_retention(std::size_t messages) {
  impl_->set_retention(messages);
}
void Broker::set_clock(std::shared_ptr<polybus::ManualClock> clock) {
  impl_->set_clock(std::move(clock));
}
void Broker::set_observer(BrokerObserver observer) {
  impl_->set_observer(std::move(observer));
}
BrokerStats Broker::stats() const {
  return impl_->stats();
}
std::uint64_t Broker::topic_size(const std::string& topic) const {
  return impl_->topic_size(topic);
}

}  // namespace polybus::mem
