// SPDX-License-Identifier: Apache-2.0
// The mem:// test broker: a fresh uniquely named mem broker per test, with options that keep
// tests fast, registered with polybus::testing for the contract suite and `polybus demo`.
#pragma once

#include "polybus/export.hpp"

#include <memory>

#include "polybus/testing.hpp"

/// The mem:// test broker for polybus::testing.
namespace polybus::mem::testing {

/// A fresh mem broker with a unique name ("test-N"); its url() sets msg_timeout=500ms and fast
/// reconnects (reconnect_initial=5ms, reconnect_max=100ms).
///
/// Its journal records each operation a client asked for (publish, subscribe, ack, nack, touch,
/// request, reply; `connection` is the client's session) and each delivery it was handed
/// (deliver, request), with the topic, the group as `channel`, the delivery id, a count (messages
/// published, attempts, a nack's delay in ms, a subscription's max_in_flight) and payload bytes.
/// Fault rules name those kinds. On an operation: `error` fails it with errc::broker_error
/// (`fatal`: the session is dropped too), `swallow` reports success and does nothing (an ack
/// swallowed lets the message time out), `close` and `reset` drop the session (the client
/// reconnects), `duplicate` stores a publish twice; `delay` applies to deliveries only. On a
/// delivery: `swallow` leaves it in flight unsent, `duplicate` hands it over twice, `delay` hands
/// it over later, on the broker's clock, `hold` withholds it as `swallow` does (mem has no
/// connection output to hold), and `error`, `close` and `reset` drop the session.
/// With a clock, ack timeouts, nack delays, deferred publishes and delayed deliveries come due
/// as it is advanced. A port other than 0 throws std::invalid_argument.
POLYBUS_API std::unique_ptr<polybus::testing::TestBroker> start_broker(
    const polybus::testing::TestBrokerOptions& options = {});

/// Registers it as "mem" (idempotent).
POLYBUS_API void register_test_brokers();

}  // namespace polybus::mem::testing
