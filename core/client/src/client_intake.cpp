// SPDX-License-Identifier: Apache-2.0
// The publish intake: a publish is checked against the capabilities and the outgoing budget on
// the caller's thread, queued, and taken to the strand once per burst, where the adapter starts
// it under a deadline the operation tracker holds.
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/error.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

Status ClientCore::take_outgoing(std::string_view what, std::string_view topic, std::size_t bytes) {
  std::size_t total = 0;
  if (shared_->outgoing.take(bytes, total)) return {};
  return Status(errc::limit_exceeded,
                std::string(what) + " " + std::string(topic) + ": " +
                    limit_exceeded_text("payload bytes not completed yet, with this one",
                                        "max_outgoing_bytes", shared_->outgoing.limit(), total));
}

void ClientCore::fail_now(Completion done, Status status) {
  if (!done) return;
  asio::post(shared_->strand,
             [shared = shared_, done = std::move(done), status = std::move(status)] {
               shared->complete("an operation refused", done, status);
             });
}

Status ClientCore::publish_refusal(std::string_view topic, Payloads& payloads,
                                   PublishOptions& options, bool batch, std::size_t& bytes) {
  const auto& caps = shared_->caps;
  // A closed client refuses everything as closed, whatever its adapter could have done.
  if (state_.load() != State::open)
    return Status(errc::closed, "publish to " + std::string(topic) + ": the client is closed");
  if (!caps.publish) return Status(errc::not_supported, scheme() + " cannot publish");
  if (batch && !caps.batch_publish)
    return Status(errc::not_supported, scheme() + " has no batch publish");
  if (options.defer.count() > 0 && !caps.deferred_publish)
    return Status(errc::not_supported, scheme() + " has no deferred publish");
  if (options.defer.count() < 0) return Status(errc::invalid_argument, "publish: a negative defer");
  if (payloads.empty()) return Status(errc::invalid_argument, "publish_batch: no messages");
  if (Status wrapped = shared_->envelope.wrap(topic, payloads, std::move(options.headers)))
    return wrapped;
  for (const auto& payload : payloads) bytes += payload.size();  // as wrapped
  return take_outgoing("publish to", topic, bytes);
}

void ClientCore::publish(std::string_view topic, Payloads payloads, Completion done,
                         PublishOptions options, bool batch) {
  std::size_t bytes = 0;
  // Made where it is returned, not assigned step by step: a publish taken costs no move of a
  // Status for each check it passes.
  const Status refused = publish_refusal(topic, payloads, options, batch, bytes);
  const std::size_t count = payloads.size();
  shared_->stats.published += count;
  if (refused) {
    shared_->stats.publish_failed += count;
    bump(shared_->publish_refused, count);
    return fail_now(std::move(done), refused);
  }
  IntakeWork work;
  work.payloads = std::move(payloads);
  work.bytes = bytes;
  work.done = std::move(done);
  work.defer = options.defer;
  work.flush_epoch = shared_->flush_epochs.enter();
  work.issued = shared_->now();
  work.deadline = deadline_from(options.timeout, work.issued);
  take_in(std::move(work), topic);
}

void ClientCore::take_in(IntakeWork&& work, std::string_view topic) {
  std::lock_guard<BriefMutex> lock(intake_mutex_);
  const bool first = intake_.empty();
  // Named here, under the intake's lock: a run of publishes to one topic shares the last name
  // without taking the names' own lock and hashing the topic for each. Within a burst, one to
  // the same topic as the work before it is named by drain_intake(), on the strand: the caller
  // then never changes the shared name's count, which the strand changes as each publish
  // completes (two threads writing one counter for every publish).
  if (last_intake_name_.str() != topic || !last_intake_name_.shared()) {
    last_intake_name_ = topic_names_.name(topic);
    work.topic = last_intake_name_;
  } else if (first) {
    work.topic = last_intake_name_;
  } else {
    work.same_topic = true;
  }
  intake_.push_back(std::move(work));
  // Posted under the lock: a thread that finds the intake non-empty knows its drain is already
  // queued on the strand, ahead of whatever that thread posts next (a close, a subscribe).
  if (first)
    asio::post(shared_->strand,
               in_memory(drain_memory_, [self = shared_from_this()] { self->drain_intake(); }));
}

void ClientCore::drain_intake() {
  // Taken into a local vector: should a completion throw, what is left goes with the exception
  // instead of staying behind to block the next drain (the intake would never be empty again).
  std::vector<IntakeWork> taken;
  {
    std::lock_guard<BriefMutex> lock(intake_mutex_);
    if (!sealed_.empty()) {  // the oldest batch is this drain's
      taken = std::move(sealed_.front());
      sealed_.pop_front();
    } else {
      taken.swap(intake_);
      intake_.swap(intake_spare_);  // an empty vector with the capacity of an earlier burst
    }
  }
  // One that fails (an adapter's exception) is reported, and the others still go: it must not
  // take the rest of the burst with it. Its operation, once made, completes at once with the
  // exception's cause (adapter_failed), not at its deadline.
  TopicName named;  // the last work's topic, for those take_in() left to be named the same
  for (auto& work : taken) {
    if (work.same_topic)
      work.topic = named;
    else
      named = work.topic;
    try {
      if (work.request)
        start_request(work);
      else
        start_publish(work);
    } catch (const std::exception& e) {
      adapter_failed(work, adapter_error_code(e),
                     std::string("the adapter failed to take it: ") + e.what());
    } catch (...) {
      adapter_failed(work, make_error_code(errc::invalid_argument),
                     "the adapter failed to take it (a non-standard exception)");
    }
  }
  taken.clear();
  std::lock_guard<BriefMutex> lock(intake_mutex_);
  intake_spare_.swap(taken);  // kept for the next drain: no allocation per burst
}

void ClientCore::adapter_failed(IntakeWork& work, std::error_code ec, const std::string& why) {
  // The topic went to the adapter with the work; the operation, once made, keeps its name.
  std::string what = work.made ? ops_->complete_if_pending(work.made, ec, why) : std::string();
  if (what.empty()) what = (work.request ? "request to " : "publish to ") + work.topic.str();
  shared_->log(LogLevel::error, what + ": " + why);
}

void ClientCore::start_publish(IntakeWork& work) {
  const std::size_t count = work.payloads.size();
  // A reply over topics still goes while a close drains the handlers that send them.
  const bool takes_it =
      state_.load() == State::open ||
      (work.answers_request && state_.load() == State::closing && !adapter_closing_);
  if (!takes_it || !adapter_) {
    shared_->outgoing.give_back(work.bytes);
    shared_->stats.publish_failed += count;
    bump(shared_->publish_refused, count);
    shared_->complete(
        "publish to " + work.topic.str(), work.done,
        Status(errc::closed, "publish to " + work.topic.str() + ": the client is closed"));
    shared_->flush_epochs.leave(work.flush_epoch);
    return;
  }
  // Kept by shared_, which the completion holds. A burst is mostly one topic, whose name is
  // the one shared string (TopicNames): the last lookup serves while it is that string.
  // Replies over topics go to one topic per requesting client: counted under one name, not
  // one each, which would crowd the application's topics out of the bounded map.
  TopicCells* cells = nullptr;
  if (work.answers_request) {
    cells = &shared_->publish_topics.cells_for(TopicRequests::kRepliesMetricTopic);
  } else {
    if (!last_cells_ || work.topic.shared() != last_cells_name_) {
      last_cells_ = &shared_->publish_topics.cells_for(work.topic);
      last_cells_name_ = work.topic.shared();  // held: its address names no other topic meanwhile
    }
    cells = last_cells_;
  }
  bump(cells->published, count);
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.done), count, cells, issued = work.issued,
       bytes = work.bytes,
       epoch = work.flush_epoch](std::error_code ec, std::string&&, std::string&& cause) {
        shared->outgoing.give_back(bytes);
        (ec ? shared->stats.publish_failed : shared->stats.publish_acked) += count;
        if (ec) {
          bump(cells->failed, count);
        } else {
          bump(cells->confirmed, count);
          cells->confirm_latency.observe(shared->arrival_now() - issued);
        }
        if (done) shared->complete("publish", done, Status(ec, std::move(cause)));
        shared->flush_epochs.leave(epoch);  // after its completion: a flush follows it
      },
      "publish to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  adapter_->publish(
      PublishWork{std::move(work.topic), std::move(work.payloads), work.defer, std::move(op)});
}

void ClientCore::publish_enveloped(std::string_view topic, std::string payload, Completion done) {
  Status refused;
  if (state_.load() == State::closed)
    refused = Status(errc::closed, "reply to " + std::string(topic) + ": the client is closed");
  else
    refused = take_outgoing("reply to", topic, payload.size());
  ++shared_->stats.published;
  if (refused) {
    ++shared_->stats.publish_failed;
    bump(shared_->publish_refused);
    return fail_now(std::move(done), refused);
  }
  IntakeWork work;
  work.bytes = payload.size();
  work.payloads = Payloads(std::move(payload));
  work.done = std::move(done);
  work.answers_request = true;
  work.flush_epoch = shared_->flush_epochs.enter();
  work.issued = shared_->now();
  work.deadline = deadline_from({}, work.issued);
  // Not kept among the shared names: one reply topic per requesting client would fill them.
  work.topic = TopicName(std::make_shared<const std::string>(topic));
  // Now, not through the intake: a close that finds the handler done must find its reply's
  // publish pending too, or it would close the connection under it.
  try {
    start_publish(work);
  } catch (const std::exception& e) {
    adapter_failed(work, adapter_error_code(e),
                   std::string("the adapter failed to take it: ") + e.what());
  }
}

}  // namespace polybus::detail
