// SPDX-License-Identifier: Apache-2.0
// Requests: through the adapter's own request-reply, or over topics (TopicRequests) where the
// protocol has none; a cancellation completes the operation in the tracker.
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/error.hpp"
#include "topic_requests.hpp"

namespace polybus::detail {

void ClientCore::request(std::string_view topic, std::string payload, ReplyCompletion done,
                         RequestOptions options) {
  Status refused;
  if (state_.load() != State::open)
    refused = Status(errc::closed, "request to " + std::string(topic) + ": the client is closed");
  else if (!shared_->caps.request_reply)
    refused =
        Status(errc::not_supported, "request to " + std::string(topic) + ": " + no_request_reply_);
  std::uint64_t correlation = 0;
  if (!refused && topic_requests_)
    refused = topic_requests_->address(topic, options.headers, correlation);
  if (!refused) refused = shared_->envelope.wrap(topic, payload, std::move(options.headers));
  if (!refused) refused = take_outgoing("request to", topic, payload.size());
  ++shared_->stats.requests;
  if (refused) {
    if (done)
      asio::post(shared_->strand, [shared = shared_, done = std::move(done), refused] {
        shared->complete("request", done, Reply{refused.code(), {}, refused.cause(), {}});
      });
    return;
  }
  IntakeWork work;
  work.bytes = payload.size();
  work.payloads = Payloads(std::move(payload));
  work.reply = std::move(done);
  work.request = true;
  work.correlation = correlation;
  work.issued = shared_->now();
  work.deadline = deadline_from(options.timeout, work.issued);
  if (options.cancellation) work.cancel = CancellationAccess::state(*options.cancellation);
  take_in(std::move(work), topic);
}

bool ClientCore::cancelled_before_start(IntakeWork& work) {
  if (!work.cancel) return false;
  {
    std::lock_guard<std::mutex> lock(work.cancel->mutex);
    if (!work.cancel->cancelled) return false;
  }
  shared_->outgoing.give_back(work.bytes);
  if (topic_requests_) topic_requests_->forget(work.correlation);
  shared_->complete("request", work.reply,
                    Reply{make_error_code(errc::canceled),
                          {},
                          "request to " + work.topic.str() + ": cancelled by the caller; not sent",
                          {}});
  return true;
}

void ClientCore::arm_cancellation(const std::shared_ptr<CancelHook>& hook, std::string_view topic) {
  hook->id = on_cancel(*hook->state, [weak = weak_from_this(), hook, topic = std::string(topic),
                                      strand = shared_->strand] {
    asio::post(strand, [weak, hook, topic] {
      auto self = weak.lock();
      if (!self || hook->finished || !self->ops_) return;
      self->ops_->complete_if_pending(hook->made, make_error_code(errc::canceled),
                                      "cancelled by the caller; it was sent and may still reach "
                                      "a responder, whose reply is dropped");
    });
  });
}

void ClientCore::start_request(IntakeWork& work) {
  if (state_.load() != State::open || !adapter_) {
    shared_->outgoing.give_back(work.bytes);
    shared_->complete("request", work.reply,
                      Reply{make_error_code(errc::closed),
                            {},
                            "request to " + work.topic.str() + ": the client is closed"});
    return;
  }
  if (cancelled_before_start(work)) return;
  if (topic_requests_) return start_request_over_topics(work);
  std::shared_ptr<CancelHook> hook;
  if (work.cancel) hook = std::make_shared<CancelHook>(CancelHook{work.cancel});
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.reply), issued = work.issued, bytes = work.bytes,
       hook](std::error_code ec, std::string&& reply, std::string&& detail) {
        if (hook) hook->finish();
        shared->outgoing.give_back(bytes);
        Headers headers;
        if (!ec) {
          ++shared->stats.replies;
          shared->request_latency.observe(shared->arrival_now() - issued);
          std::string why;
          if (shared->envelope.on() && !shared->envelope.unwrap(reply, headers, why)) {
            ++shared->stats.delivered_raw;
            if (shared->logs(LogLevel::debug))
              shared->log(LogLevel::debug, "a reply is not an envelope (" + why + "): raw");
          }
        }
        shared->complete("request", done,
                         Reply{ec, std::move(reply), std::move(detail), std::move(headers)});
      },
      "request to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  if (hook) {
    hook->made = work.made;
    arm_cancellation(hook, work.topic.str());
  }
  adapter_->request(RequestWork{work.topic.str(), std::move(work.payloads.front()), std::move(op)});
}

void ClientCore::start_request_over_topics(IntakeWork& work) {
  // What the completion needs besides the reply, in one allocation: the reply's attributes,
  // set by TopicRequests before it completes the operation, and the id to let go after.
  struct Waiting {
    Headers reply_headers;
    std::uint64_t correlation;
    std::weak_ptr<TopicRequests> requests;
    std::shared_ptr<CancelHook> hook;
  };
  auto waiting = std::make_shared<Waiting>(Waiting{{}, work.correlation, topic_requests_, nullptr});
  if (work.cancel) waiting->hook = std::make_shared<CancelHook>(CancelHook{work.cancel});
  auto op = ops_->add(
      work.deadline,
      [shared = shared_, done = std::move(work.reply), issued = work.issued, bytes = work.bytes,
       waiting](std::error_code ec, std::string&& reply, std::string&& detail) {
        if (waiting->hook) waiting->hook->finish();
        shared->outgoing.give_back(bytes);
        if (auto requests = waiting->requests.lock()) requests->forget(waiting->correlation);
        if (!ec) {
          ++shared->stats.replies;
          shared->request_latency.observe(shared->arrival_now() - issued);
        }
        shared->complete(
            "request", done,
            Reply{ec, std::move(reply), std::move(detail), std::move(waiting->reply_headers)});
      },
      "request to ", work.topic.shared(), work.issued);
  work.made = op.operation();
  if (waiting->hook) {
    waiting->hook->made = work.made;
    arm_cancellation(waiting->hook, work.topic.str());
  }
  topic_requests_->send(std::move(work.topic), std::move(work.payloads), work.correlation,
                        std::move(op), std::shared_ptr<Headers>(waiting, &waiting->reply_headers),
                        work.deadline);
}

void ClientCore::publish_request(TopicName topic, Payloads payloads, Clock::time_point deadline,
                                 std::function<void(std::error_code, const std::string&)> failed) {
  if (state_.load() == State::closed || adapter_closing_ || !adapter_)
    return failed(make_error_code(errc::closed), "the client is closed");
  auto op = ops_->add(
      deadline,
      [failed](std::error_code ec, std::string&&, std::string&& cause) {
        if (ec) failed(ec, cause);
      },
      "request to ", topic.shared(), shared_->now());
  OpCompletion if_thrown = op;
  try {
    adapter_->publish(PublishWork{std::move(topic), std::move(payloads),
                                  std::chrono::milliseconds(0), std::move(op)});
  } catch (const std::exception& e) {
    if_thrown(adapter_error_code(e), {}, std::string("the adapter failed to take it: ") + e.what());
  }
}

}  // namespace polybus::detail
