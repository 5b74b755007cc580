// SPDX-License-Identifier: Apache-2.0
// The test broker registry: each protocol's testing library registers its in-process broker;
// the contract suite and `polybus demo` run against every registered one.
#include <map>
#include <mutex>

#include "polybus/testing.hpp"

namespace polybus::testing {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, TestBrokerFactory> factories;
};

Registry& registry() {
  static auto* r =
      new Registry;  // process lifetime: factories may register from static initialisers
  return *r;
}

}  // namespace

void register_test_broker(TestBrokerFactory factory) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = factory.name;
  r.factories[name] = std::move(factory);
}

std::vector<TestBrokerFactory> test_brokers() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<TestBrokerFactory> out;
  for (auto& [name, f] : r.factories) out.push_back(f);
  return out;
}

}  // namespace polybus::testing
