// SPDX-License-Identifier: Apache-2.0
// What a failed message becomes: a nack where the broker redelivers, an attempt made here with
// backoff where it cannot, and, once its attempts are used up, a dead letter (an ordinary
// publish, through this client or another) or a discard.
#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "client_core.hpp"
#include "polybus/cloudevents.hpp"
#include "polybus/error.hpp"
#include "polybus/text/text.hpp"

namespace polybus::detail {

std::chrono::milliseconds SubscriptionCore::dead_letter_backoff(std::uint32_t attempts) const {
  // A dead-letter publish can fail at once (its client closed, say): with requeue_delay 0 the
  // next try would follow at once, for ever. A floor keeps it a retry, not a spin.
  constexpr std::chrono::milliseconds kFloor{100};
  return std::max(backoff_for(attempts), kFloor);
}

std::chrono::milliseconds SubscriptionCore::backoff_for(std::uint32_t attempts) const {
  return std::min(shared_->requeue_delay * std::max<std::uint32_t>(1, attempts),
                  shared_->max_requeue_delay);
}

void SubscriptionCore::give_up(Message message, std::string reason) {
  if (!dead_letter_.topic.empty())
    return send_to_dead_letter(std::move(message), std::move(reason));
  ++shared_->stats.discarded;
  bump(cells_->discarded);
  shared_->log(LogLevel::warn,
               topic_ + ": message " + message.id() + " discarded (" + reason + ")");
  if (on_discard_) {
    try {
      on_discard_(message);
    } catch (const std::exception& e) {
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": on_discard threw: " + e.what());
    } catch (...) {
      shared_->emit_error(make_error_code(errc::handler_failed),
                          topic_ + ": on_discard threw a non-standard exception");
    }
  }
  if (shared_->caps.ack)
    message.ack();
  else
    bump(cells_->settled);
}

void SubscriptionCore::send_to_dead_letter(Message message, std::string reason) {
  // The headers go where an envelope carries them; the payload is the message's own either way.
  const bool elsewhere = !dead_letter_.client.empty();
  bool headers_travel = shared_->envelope.on();
  if (elsewhere) {
    try {
      headers_travel = dead_letter_.client.carries_headers();
    } catch (const Error&) {
      headers_travel = false;  // that client is gone: its publish below fails with closed
    }
  }
  PublishOptions options;
  if (headers_travel) {
    // What the envelope can carry: a foreign envelope may have names CloudEvents does not allow,
    // and one refused header would fail this publish on every try.
    for (const auto& [name, value] : message.headers())
      if (cloudevents::check_header_name(name).empty() && text::is_valid_utf8(value))
        options.headers.set(name, value);
    options.headers.set("deadletterreason",
                        text::is_valid_utf8(reason) ? reason : "(the reason is not UTF-8)");
    options.headers.set("deadletterattempts", std::to_string(message.attempts()));
    options.headers.set("deadlettertopic", topic_);
  }
  auto done = [self = shared_from_this(), message, reason](const Status& status) mutable {
    if (!status) {
      ++self->shared_->stats.dead_lettered;
      bump(self->cells_->dead_lettered);
      self->shared_->log(LogLevel::warn, self->topic_ + ": message " + message.id() +
                                             " sent to dead-letter topic " +
                                             self->dead_letter_.topic + " (" + reason + ")");
      if (self->shared_->caps.ack)
        message.ack();
      else
        bump(self->cells_->settled);
      return;
    }
    // Not acknowledged: nothing is lost. The broker gives it back, or it is tried again here.
    self->shared_->emit_error(status.code(),
                              self->topic_ + ": message " + message.id() +
                                  ": the publish to dead-letter topic " + self->dead_letter_.topic +
                                  " failed, so it stays unacknowledged: " + status.message());
    if (self->shared_->caps.ack)
      message.nack(self->dead_letter_backoff(message.attempts()));
    else
      self->retry_in_place(std::move(message), true, std::move(reason));
  };
  std::string payload(message.payload());
  if (elsewhere) {
    dead_letter_.client.publish(dead_letter_.topic, std::move(payload), std::move(options),
                                std::move(done));
  } else if (auto client = client_.lock()) {
    client->publish(dead_letter_.topic, Payloads(std::move(payload)), std::move(done),
                    std::move(options), false);
  } else {
    done(Status(errc::closed, "the client is gone"));
  }
}

void SubscriptionCore::retry_in_place(Message message, bool dead_letter, std::string reason) {
  // Messages waiting for a retry have a budget of their own, the same size as the handlers'
  // (max_held_*): counted with those, they would pause delivery for as long as the retries
  // wait, and on a connection that also carries publish confirmations (Figg) stall those.
  bool room;
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    const std::size_t bytes = message.payload().size();
    room = retries_waiting_.load() < max_held_messages_ && retry_bytes_ + bytes <= max_held_bytes_;
    if (room) {
      ++retries_waiting_;
      retry_bytes_ += bytes;
    }
  }
  if (!room) {
    const std::string full =
        "no room to hold it for another try (" + std::to_string(retries_waiting_.load()) +
        " messages wait for theirs; max_held_messages=" + std::to_string(max_held_messages_) +
        ", max_held_bytes=" + std::to_string(max_held_bytes_) + ")";
    if (!dead_letter) return give_up(std::move(message), reason + "; " + full);
    // A dead letter that could not be sent and cannot be held: said, never dropped silently.
    shared_->emit_error(make_error_code(errc::limit_exceeded),
                        topic_ + ": message " + message.id() +
                            " dropped: its dead-letter publish "
                            "failed and there is " +
                            full);
    bump(cells_->settled);
    return;
  }
  asio::post(shared_->strand, [self = shared_from_this(), message = std::move(message), dead_letter,
                               reason = std::move(reason)]() mutable {
    const auto delay = dead_letter ? self->dead_letter_backoff(message.attempts())
                                   : self->backoff_for(message.attempts());
    self->retries_.emplace_back(self->shared_->strand, self->shared_->clock, std::move(message),
                                dead_letter, std::move(reason));
    auto due = std::prev(self->retries_.end());
    due->timer.expires_after(delay);
    due->timer.async_wait([self, due](std::error_code ec) {
      if (!ec) self->retry_now(due);  // else cancelled: deactivate() reported it
    });
  });
}

void SubscriptionCore::retry_now(std::list<Retry>::iterator due) {
  Message message = std::move(due->message);
  const bool dead_letter = due->dead_letter;
  std::string reason = std::move(due->reason);
  retries_.erase(due);
  {
    std::lock_guard<BriefMutex> lock(mutex_);
    --retries_waiting_;
    retry_bytes_ -= std::min(retry_bytes_, message.payload().size());
  }
  if (!active_.load()) {
    shared_->emit_error(make_error_code(errc::closed),
                        topic_ + ": message " + message.id() +
                            " dropped before its retry: the subscription ended (" + reason + ")");
    bump(cells_->settled);
    return;
  }
  if (!dead_letter) return enqueue(std::move(message));
  pool_->post([self = shared_from_this(), message = std::move(message),
               reason = std::move(reason)] { self->send_to_dead_letter(message, reason); });
}

bool SubscriptionCore::handle_failure(Message& message, const std::string& failure) {
  const bool last = max_attempts_ > 0 && message.attempts() >= max_attempts_;
  if (last && (!dead_letter_.topic.empty() || !shared_->caps.ack)) {
    // Its reason is known only now: give it up here rather than on a redelivery.
    give_up(message, "attempt " + std::to_string(message.attempts()) + " of " +
                         std::to_string(max_attempts_) + " failed: " + failure);
    return false;
  }
  if (shared_->caps.ack) {
    message.nack();
  } else if (max_attempts_ > 0) {
    // The broker cannot redeliver: the next attempt is made here.
    ++detail::state_of(message)->attempts;
    retry_in_place(message, false, failure);
    return false;
  }
  return true;
}

}  // namespace polybus::detail
