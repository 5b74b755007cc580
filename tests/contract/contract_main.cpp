// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "catch_session.hpp"
#include "contract.hpp"
#include "envelope_brokers.hpp"
#include "figg_server_broker.hpp"
#include "nsq_harness_broker.hpp"
#include "polybus/register_all_test_brokers.hpp"
#include "tls_brokers.hpp"

namespace polybus::contract {

namespace {
// Brokers that exist only when their real server is configured: listed always, so that ctest
// shows them skipped rather than absent.
const std::vector<std::pair<std::string, std::string>> kOptionalBrokers = {
    {"nsq-real", "POLYBUS_NSQ_HARNESS (real nsqd 1.3)"},
    {"nsq+lookupd-real", "POLYBUS_NSQ_HARNESS (real nsqd and nsqlookupd 1.3)"},
    {"figg-real", "POLYBUS_FIGG_SERVER (the real Figg server)"},
};

std::vector<std::string>& cases() {
  static std::vector<std::string> titles;
  return titles;
}

std::vector<std::string>& request_cases() {
  static std::vector<std::string> titles;
  return titles;
}

// What the (broker, case) runs of this process did.
std::size_t ran = 0, skipped = 0;
bool current_skipped = false;
}  // namespace

bool add_case(const char* title) {
  cases().push_back(title);
  return true;
}

bool add_request_case(const char* title) {
  request_cases().push_back(title);
  return true;
}

bool is_request_case(const std::string& title) {
  const auto& titles = request_cases();
  return std::find(titles.begin(), titles.end(), title) != titles.end();
}

bool is_variant(const std::string& broker) {
  for (const auto& [plain, variant] : envelope_variants())
    if (variant == broker) return true;
  return false;
}

bool runs_on(const std::string& broker, const std::string& title) {
  return !is_variant(broker) || is_request_case(title);
}

const std::vector<std::string>& case_titles() {
  return cases();
}

void skip(const std::string& why) {
  current_skipped = true;
  WARN("skipped: " << why);
}

void begin_run() {
  current_skipped = false;
}
void end_run() {
  ++(current_skipped ? skipped : ran);
}

std::vector<std::string> broker_names() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("POLYBUS_CONTRACT_BROKERS"); env && *env) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) names.push_back(item);
    return names;
  }
  for (const auto& f : testing::test_brokers()) names.push_back(f.name);
  return names;
}

std::unique_ptr<testing::TestBroker> start_broker(const std::string& name) {
  for (const auto& f : testing::test_brokers())
    if (f.name == name) return f.start();
  for (const auto& [optional, needs] : kOptionalBrokers)
    if (optional == name) {
      skip(name + " needs " + needs);
      return nullptr;
    }
  for (const auto& [plain, variant] : envelope_variants())
    for (const auto& [optional, needs] : kOptionalBrokers)
      if (variant == name && optional == plain) {
        skip(name + " needs " + needs);
        return nullptr;
      }
  FAIL("no test broker named '" << name << "' is registered");
  return nullptr;
}

Env::Env(const std::string& name) : name(name), broker(start_broker(name)) {
  if (!broker) return;
  url = broker->url();
  auto scheme = Url::parse(url).scheme;
  REQUIRE(describe_scheme(scheme).has_value());
  // The client's, not the scheme's: options can add to them (envelope=cloudevents gives NSQ and
  // Figg request/reply over topics).
  auto probe = connect();
  caps = probe.capabilities();
  probe.close_sync(std::chrono::seconds(5));
}

Client Env::connect(Options extra) const {
  ConnectOptions options;
  options.options = std::move(extra);
  return polybus::connect(url, std::move(options));
}

}  // namespace polybus::contract

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  polybus::contract::register_tls_test_brokers();
  polybus::test::register_real_nsq_brokers();
  polybus::test::register_real_figg_broker();
  polybus::contract::register_envelope_test_brokers();
  // --list-contract: "<broker> <case>" per line, for the ctest registration
  // (discover_contract_tests.cmake).
  if (argc == 2 && std::string(argv[1]) == "--list-contract") {
    std::vector<std::string> brokers;
    for (const auto& f : polybus::testing::test_brokers()) brokers.push_back(f.name);
    for (const auto& [optional, needs] : polybus::contract::kOptionalBrokers)
      if (std::find(brokers.begin(), brokers.end(), optional) == brokers.end())
        brokers.push_back(optional);
    for (const auto& [plain, variant] : polybus::contract::envelope_variants())
      if (std::find(brokers.begin(), brokers.end(), variant) == brokers.end())
        brokers.push_back(variant);
    for (const auto& broker : brokers)
      for (const auto& title : polybus::contract::cases())
        if (polybus::contract::runs_on(broker, title)) std::cout << broker << ' ' << title << '\n';
    return 0;
  }
  const int result = polybus::test::run_catch_session(argc, argv);
  // Every run this process made was skipped: ctest's SKIP_RETURN_CODE.
  if (result == 0 && polybus::contract::ran == 0 && polybus::contract::skipped > 0) return 77;
  return result;
}
