// The mem:// test broker: a fresh uniquely named mem broker per test, with options that keep
// tests fast, registered with polybus::testing for the contract suite and `polybus demo`.
#pragma once

#include <memory>

#include "polybus/testing.hpp"

namespace polybus::mem::testing {

std::unique_ptr<polybus::testing::TestBroker> start_broker();

// Registers it as "mem" (idempotent).
void register_test_brokers();

}  // namespace polybus::mem::testing
