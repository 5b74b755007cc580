// SPDX-License-Identifier: Apache-2.0
// The contract every adapter passes through its URL, gated by its capabilities (in the manner
// of Watermill's universal pub/sub tests). Each TEST_CASE runs once per in-process broker that is
// registered, or per name in POLYBUS_CONTRACT_BROKERS (comma-separated) when that is set.
//
// ctest runs one process per (broker, case), named contract:<broker>:<case>. A case whose
// capabilities the broker lacks says so with CONTRACT_REQUIRES and the process exits 77, which
// ctest reports as skipped (a real broker whose server is not configured, likewise): nothing
// capability-gated is ever counted as passed without running.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "polybus/all.hpp"
#include "polybus/testing.hpp"
#include "test_support.hpp"

namespace polybus::contract {

using namespace std::chrono_literals;
using test::Collector;
using test::Latch;
using test::unique_name;

std::vector<std::string> broker_names();
// Records that the running (broker, case) does not apply, and why.
void skip(const std::string& why);
// Every case's title, as CONTRACT_CASE registers it.
bool add_case(const char* title);
// A case that requests or serves (CONTRACT_REQUEST_CASE): it runs on the +cloudevents variants
// too (envelope_brokers.hpp).
bool add_request_case(const char* title);
bool is_request_case(const std::string& title);
bool is_variant(const std::string& broker);  // a +cloudevents variant
// Whether the case runs on the broker: a variant runs only the request cases.
bool runs_on(const std::string& broker, const std::string& title);
const std::vector<std::string>& case_titles();
// Called by CONTRACT_CASE around each broker's run.
void begin_run();
void end_run();
std::unique_ptr<testing::TestBroker> start_broker(const std::string& name);

// Messages as handlers saw them, payload and headers, for the test thread to check (Catch2's
// assertions are not thread-safe).
struct Received {
  std::mutex mutex;
  std::vector<std::pair<std::string, Headers>> messages;
  Latch arrived;
  void add(const Message& m) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      messages.emplace_back(std::string(m.payload()), m.headers());
    }
    arrived.count_down();
  }
  std::pair<std::string, Headers> at(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.at(i);
  }
};

// Per-test set-up: a started broker and the capabilities of its scheme.
struct Env {
  explicit Env(const std::string& name);
  std::string name;  // the test broker's
  std::unique_ptr<testing::TestBroker> broker;
  std::string url;
  Capabilities caps;
  Client connect(Options extra = {}) const;
};

}  // namespace polybus::contract

// One test case body per broker: `auto& env = ...` inside.
#define CONTRACT_CASE(title)                                                       \
  static void contract_body_##title(polybus::contract::Env& env);                  \
  static const bool contract_listed_##title = polybus::contract::add_case(#title); \
  TEST_CASE(#title, "[contract]") {                                                \
    for (const auto& name : polybus::contract::broker_names()) {                   \
      if (!polybus::contract::runs_on(name, #title)) continue;                     \
      DYNAMIC_SECTION(name) {                                                      \
        polybus::contract::begin_run();                                            \
        polybus::contract::Env env(name);                                          \
        if (env.broker) contract_body_##title(env);                                \
        polybus::contract::end_run();                                              \
      }                                                                            \
    }                                                                              \
  }                                                                                \
  static void contract_body_##title(polybus::contract::Env& env)

// A case that requests or serves: run on the plain brokers and on their +cloudevents variants,
// where request/reply runs over topics.
#define CONTRACT_REQUEST_CASE(title)                                                               \
  static const bool contract_request_listed_##title = polybus::contract::add_request_case(#title); \
  CONTRACT_CASE(title)

// The case needs this of the broker; without it the run is reported as skipped.
#define CONTRACT_REQUIRES(condition)                                                \
  do {                                                                              \
    if (!(condition)) {                                                             \
      polybus::contract::skip("the broker lacks what the case needs: " #condition); \
      return;                                                                       \
    }                                                                               \
  } while (0)
