// SPDX-License-Identifier: Apache-2.0
// A user's integration test, from an installed polybus: every in-process broker starts in one
// line, and a message (or a request) goes through it by its URL. Prints "<broker> ok" for each.
#include <polybus/all.hpp>
#include <polybus/register_all_test_brokers.hpp>

#include <future>
#include <iostream>

namespace {

bool round_trip(const polybus::testing::TestBrokerFactory& factory) {
  auto broker = factory.start();
  auto client = polybus::connect(broker->url());
  const auto caps = client.capabilities();
  std::promise<std::string> got;
  polybus::Subscription sub;
  if (caps.publish && caps.subscribe) {
    sub = client.subscribe("installed", {}, [&](polybus::Message& m) {
      try {
        got.set_value(std::string(m.payload()));
      } catch (const std::future_error&) {  // a second delivery
      }
    });
    if (sub.wait_ready(std::chrono::seconds(10))) return false;
    if (client.publish_sync("installed", "hello")) return false;
    auto future = got.get_future();
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return false;
    if (future.get() != "hello") return false;
  } else if (caps.request_reply) {
    sub = client.serve("installed", [](polybus::Message& m) { return std::string(m.payload()); });
    if (sub.wait_ready(std::chrono::seconds(10))) return false;
    if (client.request_sync("installed", "hello", std::chrono::seconds(10)).payload != "hello")
      return false;
  } else {
    return false;
  }
  return !client.close_sync(std::chrono::seconds(5));
}

}  // namespace

int main() {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  int failed = 0;
  for (const auto& factory : polybus::testing::test_brokers()) {
    const bool ok = round_trip(factory);
    std::cout << factory.name << (ok ? " ok" : " FAILED") << "\n";
    failed += ok ? 0 : 1;
  }
  return failed == 0 ? 0 : 1;
}
