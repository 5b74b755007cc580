// SPDX-License-Identifier: Apache-2.0
#include "polybus/message.hpp"

#include "polybus/client_ref.hpp"

#include <algorithm>
#include <asio/post.hpp>

#include "client_shared.hpp"
#include "polybus/error.hpp"

namespace polybus {

namespace {
const std::string kEmpty;
const Headers kNoHeaders;
}  // namespace

const std::string& Message::topic() const {
  return state_ ? state_->topic_name() : kEmpty;
}
std::string_view Message::payload() const {
  return state_ ? state_->payload : std::string_view{};
}
const std::string& Message::id() const {
  return state_ ? state_->id.text() : kEmpty;
}
std::uint32_t Message::attempts() const {
  return state_ ? state_->attempts : 0;
}
std::optional<std::int64_t> Message::timestamp_ns() const {
  return state_ ? state_->timestamp_ns : std::nullopt;
}
std::optional<std::uint64_t> Message::offset() const {
  return state_ ? state_->offset : std::nullopt;
}
const Headers& Message::headers() const {
  return state_ ? state_->headers : kNoHeaders;
}
bool Message::expects_reply() const {
  return state_ && state_->expects_reply;
}
bool Message::responded() const {
  return state_ && state_->responded.load();
}
ClientRef Message::client() const {
  return state_ ? ClientRef(state_->client->handle) : ClientRef();
}
void Message::take_manual_control() {
  if (state_) state_->manual.store(true);
}

namespace {

// Common path of every response: checks, then runs fn on the client's strand.
template <typename Fn>
std::error_code respond(const std::shared_ptr<detail::MessageState>& state, bool final, Fn fn) {
  if (!state) return make_error_code(errc::invalid_argument);
  if (final ? state->responded.exchange(true) : state->responded.load())
    return make_error_code(errc::already_responded);
  // Looked at here, taken on the strand where the answer runs: the io thread changes the
  // adapter's count for every message it makes, and a lock() here, on a handler thread, would
  // move that count between the cores for every answer. An answer that finds the adapter gone on
  // the strand came after the client closed, and goes nowhere, as on the closed connection.
  if (state->backend.expired()) return make_error_code(errc::closed);
  state->client->responses.push(
      [state, fn = std::move(fn)]() mutable {
        if (auto backend = state->backend.lock()) fn(*backend, *state);
      },
      *state->client);
  return {};
}

}  // namespace

std::error_code Message::ack() {
  if (!state_) return make_error_code(errc::invalid_argument);
  if (state_->expects_reply || !state_->client->caps.ack)
    return make_error_code(errc::not_supported);
  auto ec = respond(state_, true, [](MessageBackend& b, detail::MessageState& s) { b.ack(s); });
  if (!ec) {
    ++state_->client->stats.acked;
    if (state_->subscription_cells) detail::bump(state_->subscription_cells->acked);
  }
  return ec;
}

std::error_code Message::nack(std::chrono::milliseconds delay) {
  if (!state_) return make_error_code(errc::invalid_argument);
  const auto& client = *state_->client;
  if (state_->expects_reply || !client.caps.ack) return make_error_code(errc::not_supported);
  if (delay.count() > 0 && !client.caps.nack_with_delay)
    return make_error_code(errc::not_supported);
  if (delay.count() < 0) {
    // Default: grows with the attempts, capped (as go-nsq does).
    delay = client.caps.nack_with_delay
                ? std::min(client.requeue_delay * std::max<std::uint32_t>(1, state_->attempts),
                           client.max_requeue_delay)
                : std::chrono::milliseconds(0);
  }
  auto ec = respond(state_, true,
                    [delay](MessageBackend& b, detail::MessageState& s) { b.nack(s, delay); });
  if (!ec) {
    ++state_->client->stats.nacked;
    if (state_->subscription_cells) detail::bump(state_->subscription_cells->nacked);
  }
  return ec;
}

std::error_code Message::touch() {
  if (!state_) return make_error_code(errc::invalid_argument);
  if (!state_->client->caps.touch || state_->expects_reply)
    return make_error_code(errc::not_supported);
  return respond(state_, false, [](MessageBackend& b, detail::MessageState& s) { b.touch(s); });
}

std::error_code Message::reply(std::string payload) {
  if (!state_) return make_error_code(errc::invalid_argument);
  if (!state_->expects_reply) return make_error_code(errc::not_supported);
  const auto& client = *state_->client;
  if (auto wrapped = client.replies_over_topics
                         ? Status()
                         : client.envelope.wrap_reply(state_->topic_name(), payload);
      wrapped) {
    // The requester hears why instead of waiting for its deadline.
    state_->client->emit_error(wrapped.code(),
                               state_->topic_name() + ": reply: " + wrapped.message());
    detail::detail_reply_error(*this, wrapped.cause());
    return wrapped.code();
  }
  auto ec =
      respond(state_, true,
              [payload = std::move(payload)](MessageBackend& b, detail::MessageState& s) mutable {
                b.reply(s, std::move(payload), {}, {});
              });
  if (!ec && state_->subscription_cells) detail::bump(state_->subscription_cells->replied);
  return ec;
}

namespace detail {
void detail_reply_error(Message& message, const std::string& what) {
  const auto& state = detail::state_of(message);
  auto ec = respond(state, true, [what = std::string(what)](MessageBackend& b, MessageState& s) {
    b.reply(s, {}, make_error_code(errc::handler_failed), what);
  });
  if (!ec && state->subscription_cells) bump(state->subscription_cells->replied);
}
}  // namespace detail

}  // namespace polybus
