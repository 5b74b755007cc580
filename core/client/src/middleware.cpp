// SPDX-License-Identifier: Apache-2.0
// The ready middleware (polybus/middleware.hpp) and the composition of a subscription's chain.
#include "polybus/middleware.hpp"

#include <asio/post.hpp>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "client_core.hpp"
#include "middleware_chain.hpp"
#include "polybus/error.hpp"

namespace polybus {

namespace detail {

MessageHandler wrap_handler(const std::vector<Middleware>& chain, MessageHandler handler) {
  MessageHandler next = std::move(handler);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!*it)
      throw Error(errc::invalid_argument, "SubscribeOptions::middleware: entry " +
                                              std::to_string(chain.rend() - it - 1) + " is empty");
    next = [step = *it, inner = std::move(next)](Message& message) { step(message, inner); };
  }
  return next;
}

namespace {
// Where the innermost step of a serve chain leaves the reply for the wrapper around the chain:
// both run on the handler's thread, one message at a time.
struct ServeSlot {
  std::string reply;
  bool called = false;
};
thread_local ServeSlot* serve_slot = nullptr;
}  // namespace

ServeHandler wrap_serve_handler(const std::vector<Middleware>& chain, ServeHandler handler) {
  if (chain.empty()) return handler;
  MessageHandler wrapped = wrap_handler(chain, [handler = std::move(handler)](Message& message) {
    std::string reply = handler(message);
    if (serve_slot) {
      serve_slot->reply = std::move(reply);
      serve_slot->called = true;
    }
  });
  return [wrapped = std::move(wrapped)](Message& message) {
    ServeSlot slot;
    ServeSlot* const outer = serve_slot;
    serve_slot = &slot;
    struct Restore {
      ServeSlot* outer;
      ~Restore() { serve_slot = outer; }
    } restore{outer};
    wrapped(message);
    if (!slot.called && !message.responded() && !detail::state_of(message)->manual.load())
      detail_reply_error(message, "a middleware neither passed the request on nor answered it");
    return std::move(slot.reply);
  };
}

namespace {
SubscriptionCells* cells_of(const Message& message) {
  return detail::state_of(message) ? detail::state_of(message)->subscription_cells.get() : nullptr;
}
void count(const Message& message, std::atomic<std::uint64_t> SubscriptionCells::*cell) {
  if (auto* cells = cells_of(message)) bump(cells->*cell);
}
std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + "ms";
}
}  // namespace

}  // namespace detail

namespace middleware {

using detail::count;
using detail::SubscriptionCells;

Middleware timeout(std::chrono::milliseconds limit) {
  if (limit.count() <= 0)
    throw Error(errc::invalid_argument,
                "middleware::timeout: the limit must be above 0, not " + detail::ms(limit));
  return [limit](Message& message, const MessageHandler& next) {
    detail::ClientShared* client =
        detail::state_of(message) ? detail::state_of(message)->client : nullptr;
    if (!client) return next(message);
    // Whoever sets `decided` first answers the message: the handler's return or the timer. One
    // allocation per message for both.
    struct Race {
      Race(const Strand& strand, const std::shared_ptr<ManualClock>& clock,
           std::chrono::milliseconds limit)
          : timer(strand, clock) {
        timer.expires_after(limit);
      }
      ClockTimer timer;
      std::atomic<bool> decided{false};
    };
    auto race = std::make_shared<Race>(client->strand, client->clock, limit);
    race->timer.async_wait([race, message, limit](std::error_code ec) mutable {
      if (ec || race->decided.load()) return;
      const auto* shared = detail::state_of(message)->client;
      const bool can_answer = message.expects_reply() || shared->caps.ack;
      count(message, &SubscriptionCells::handler_timeouts);
      if (!can_answer || race->decided.exchange(true)) return;  // no nack: it stays the handler's
      const std::string why =
          "the handler ran longer than middleware::timeout's " + detail::ms(limit);
      if (message.expects_reply())
        detail::detail_reply_error(message, why);
      else
        message.nack();
      shared->emit_error(
          make_error_code(errc::timeout),
          message.topic() + ": message " + message.id() + ": " + why + ", so it was given back");
    });
    auto settle = [&] {
      if (race->decided.exchange(true)) {
        count(message, &SubscriptionCells::handler_late_returns);
        return false;
      }
      asio::post(client->strand, [race] { race->timer.cancel(); });  // the timer's own strand
      return true;
    };
    try {
      next(message);
    } catch (...) {
      if (settle()) throw;
      return;  // late: ignored
    }
    settle();
  };
}

Middleware throttle(double per_second) {
  if (!(per_second > 0) || per_second > 1e9)
    throw Error(errc::invalid_argument,
                "middleware::throttle: per_second must be above 0 and at most 1e9, not " +
                    std::to_string(per_second));
  struct State {
    std::mutex mutex;
    Clock::time_point next{};
    Clock::duration gap;
  };
  auto state = std::make_shared<State>();
  state->gap =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / per_second));
  return [state](Message& message, const MessageHandler& next) {
    Clock::time_point turn;
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      turn = std::max(now, state->next);  // an idle spell earns no burst
      state->next = turn + state->gap;
    }
    if (turn > now) {
      count(message, &SubscriptionCells::throttled_messages);
      std::this_thread::sleep_until(turn);
    }
    next(message);
  };
}

Middleware circuit_breaker(CircuitBreakerOptions options) {
  if (options.failures == 0 || options.cool_down.count() <= 0)
    throw Error(errc::invalid_argument, "middleware::circuit_breaker: failures (" +
                                            std::to_string(options.failures) + ") and cool_down (" +
                                            detail::ms(options.cool_down) + ") must be above 0");
  struct State {
    std::mutex mutex;
    enum class Phase { closed, open, half_open } phase = Phase::closed;
    std::uint32_t consecutive = 0;
    Clock::time_point open_until{};
    bool probing = false;  // half open: the one message let through is being handled
  };
  using Phase = State::Phase;
  auto state = std::make_shared<State>();
  return [state, options](Message& message, const MessageHandler& next) {
    bool probe = false, reject = false;
    // On the client's clock, as the subscription's cool-down is.
    const detail::ClientShared* client =
        detail::state_of(message) ? detail::state_of(message)->client : nullptr;
    const auto now = [client] { return client ? client->now() : Clock::now(); };
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (state->phase == Phase::open && now() >= state->open_until)
        state->phase = Phase::half_open;
      if (state->phase == Phase::open) {
        reject = true;
      } else if (state->phase == Phase::half_open) {
        reject = state->probing;
        probe = !reject;
        state->probing = true;
      }
    }
    if (reject) {
      count(message, &SubscriptionCells::circuit_rejected_messages);
      throw Error(errc::handler_failed,
                  "middleware::circuit_breaker is open after " + std::to_string(options.failures) +
                      " consecutive failures: the message was not handed to the handler");
    }
    try {
      next(message);
    } catch (...) {
      bool open_now = false;
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        if (probe || ++state->consecutive >= options.failures) {
          open_now = state->phase != Phase::open;
          state->phase = Phase::open;
          state->open_until = now() + options.cool_down;
          state->consecutive = 0;
          state->probing = false;
        }
      }
      if (open_now) {
        count(message, &SubscriptionCells::circuit_opened);
        if (auto* sub = detail::SubscriptionCore::current()) sub->cool_down(options.cool_down);
      }
      throw;
    }
    std::lock_guard<std::mutex> lock(state->mutex);
    state->consecutive = 0;
    if (probe) {
      state->phase = Phase::closed;
      state->probing = false;
    }
  };
}

Middleware deduplicate(DeduplicateOptions options) {
  if (options.window == 0)
    throw Error(errc::invalid_argument, "middleware::deduplicate: the window must be above 0");
  struct State {
    std::mutex mutex;
    std::unordered_set<std::string> seen;
    std::deque<std::string> order;  // oldest first: the one forgotten next
  };
  auto state = std::make_shared<State>();
  return [state, window = options.window](Message& message, const MessageHandler& next) {
    if (message.expects_reply()) return next(message);
    // CloudEvents names allow no '-': a CloudEvents publisher spells it idempotencykey.
    auto key_header = message.headers().get("idempotency-key");
    if (!key_header) key_header = message.headers().get("idempotencykey");
    const std::string key = key_header             ? "k:" + std::string(*key_header)
                            : message.id().empty() ? std::string()
                                                   : "i:" + message.id();
    if (key.empty()) return next(message);
    bool seen;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      seen = state->seen.count(key) > 0;
    }
    if (seen) {
      count(message, &SubscriptionCells::deduplicated_messages);
      if (detail::state_of(message)->client->caps.ack) message.ack();
      return;
    }
    next(message);  // what throws is not remembered: its redelivery is handled again
    std::lock_guard<std::mutex> lock(state->mutex);
    if (!state->seen.insert(key).second) return;
    state->order.push_back(key);
    if (state->order.size() > window) {
      state->seen.erase(state->order.front());
      state->order.pop_front();
    }
  };
}

}  // namespace middleware
}  // namespace polybus
