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
POLYBUS_API std::unique_ptr<polybus::testing::TestBroker> start_broker();

/// Registers it as "mem" (idempotent).
POLYBUS_API void register_test_brokers();

}  // namespace polybus::mem::testing
