// The contract every adapter passes through its URL, gated by its capabilities (in the manner
// of Watermill's universal pub/sub tests). Each TEST_CASE runs once per in-process broker that is
// registered, or per name in POLYBUS_CONTRACT_BROKERS (comma-separated) when that is set.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "polybus/polybus.hpp"
#include "polybus/testing.hpp"
#include "test_support.hpp"

namespace polybus::contract {

using namespace std::chrono_literals;
using test::Collector;
using test::Latch;
using test::unique_name;

std::vector<std::string> broker_names();
std::unique_ptr<testing::TestBroker> start_broker(const std::string& name);

// Per-test set-up: a started broker and the capabilities of its scheme.
struct Env {
  explicit Env(const std::string& name);
  std::unique_ptr<testing::TestBroker> broker;
  std::string url;
  Capabilities caps;
  Client connect(Options extra = {}) const;
};

}  // namespace polybus::contract

// One test case body per broker: `auto& env = ...` inside.
#define CONTRACT_CASE(title)                                                          \
  static void contract_body_##title(polybus::contract::Env& env);                     \
  TEST_CASE(#title, "[contract]") {                                                  \
    for (const auto& name : polybus::contract::broker_names()) {                      \
      DYNAMIC_SECTION(name) {                                                         \
        polybus::contract::Env env(name);                                             \
        contract_body_##title(env);                                                   \
      }                                                                               \
    }                                                                                 \
  }                                                                                   \
  static void contract_body_##title(polybus::contract::Env& env)
