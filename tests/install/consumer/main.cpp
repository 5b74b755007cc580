// SPDX-License-Identifier: Apache-2.0
// Publishes and receives one message over mem:// through an installed polybus.
#include <polybus/all.hpp>

#include <future>
#include <iostream>

int main() {
  // The library linked is the release of the headers included.
  if (std::string(polybus::version()) != POLYBUS_VERSION_STRING) return 1;
  polybus::register_all_schemes();
  auto client = polybus::connect("mem://installed");
  std::promise<std::string> got;
  auto sub = client.subscribe(
      "t", {}, [&](polybus::Message& m) { got.set_value(std::string(m.payload())); });
  if (sub.wait_ready(std::chrono::seconds(10))) return 1;
  if (client.publish_sync("t", "from an installed polybus")) return 1;
  auto future = got.get_future();
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return 1;
  std::cout << future.get() << "\n";
  return client.close_sync(std::chrono::seconds(5)) ? 1 : 0;
}
