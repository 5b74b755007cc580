// SPDX-License-Identifier: Apache-2.0
// Ready middleware for SubscribeOptions::middleware, in the manner of Watermill's: each returns a
// polybus::Middleware whose state (counters, windows, the breaker's state) is shared by every
// copy, so one value placed in one subscription's chain serves that subscription. What each one
// did is counted in the subscription's metrics (Client::metrics(), docs/metrics.md).
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "polybus/subscription.hpp"

/// Ready middleware for SubscribeOptions::middleware: time-outs, throttling, a circuit breaker and
/// deduplication.
namespace polybus::middleware {

/// A handler still running `limit` after it started has its message nacked at once (a request
/// gets an error reply), so the broker can hand it to another consumer; the handler's late return,
/// or what it throws then, is ignored and counted (handler_late_returns). Where the scheme has no
/// nack the time-out is counted and the message stays the handler's. The handler is not stopped:
/// C++ cannot stop a thread; it should watch its own time.
POLYBUS_API Middleware timeout(std::chrono::milliseconds limit);

/// At most `per_second` messages a second reach the rest of the chain, spread evenly: a handler
/// thread that comes early waits for its turn (counted in throttled_messages).
POLYBUS_API Middleware throttle(double per_second);

/// When circuit_breaker() opens, and for how long.
struct POLYBUS_API CircuitBreakerOptions {
  std::uint32_t failures = 5;  ///< consecutive handler failures that open the breaker
  std::chrono::milliseconds cool_down{1000};  ///< how long the subscription pauses once open
};
/// After `failures` consecutive failures (the rest of the chain threw) the subscription pauses
/// for `cool_down`, as Subscription::pause() does (held messages are touched where the scheme
/// can); then one message is let through: its success closes the breaker, its failure opens it
/// for another cool_down. A message handed over while the breaker is open fails at once without
/// reaching the handler (counted in circuit_rejected_messages), as a failed handler's message.
POLYBUS_API Middleware circuit_breaker(CircuitBreakerOptions options = {});

/// What deduplicate() remembers.
struct POLYBUS_API DeduplicateOptions {
  std::size_t window = 10000;  ///< how many of the last handled messages are remembered
};
/// A message whose key was handled (the chain returned without throwing) within the last `window`
/// messages is acked without reaching the handler (deduplicated_messages). The key is the
/// envelope's idempotency-key header where it has one, else the message's id; a message with
/// neither, and a request, passes. Memory is bounded by `window` keys.
POLYBUS_API Middleware deduplicate(DeduplicateOptions options = {});

}  // namespace polybus::middleware
