// SPDX-License-Identifier: Apache-2.0
// Publish and subscribe with a consumer group. Run with a URL, e.g.
//   example_publish_subscribe mem://example
//   example_publish_subscribe nsq://127.0.0.1:4150
#include <condition_variable>
#include <iostream>
#include <mutex>

#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  const std::string url = argc > 1 ? argv[1] : "mem://example";
  polybus::ConnectOptions options;
  options.on_state = [](const polybus::StateEvent& e) {
    std::cerr << "[" << polybus::to_string(e.state) << "] " << e.endpoint << "\n";
  };
  auto client = polybus::connect(url, options);

  std::mutex mutex;
  std::condition_variable cv;
  int received = 0;
  polybus::SubscribeOptions sub_options;
  if (client.capabilities().consumer_groups) sub_options.group = "printers";
  auto subscription = client.subscribe("greetings", sub_options, [&](polybus::Message& m) {
    // Returning normally acknowledges the message; throwing would requeue it.
    std::cout << "got '" << m.payload() << "' (attempt " << m.attempts() << ")\n";
    std::lock_guard<std::mutex> lock(mutex);
    ++received;
    cv.notify_one();
  });
  if (auto ec = subscription.wait_ready(std::chrono::seconds(10))) {
    std::cerr << "subscribe failed: " << ec.message() << "\n";
    return 1;
  }
  for (int i = 0; i < 3; ++i) {
    client.publish("greetings", "hello " + std::to_string(i), [](std::error_code ec) {
      if (ec) std::cerr << "publish failed: " << ec.message() << "\n";
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  bool all = cv.wait_for(lock, std::chrono::seconds(10), [&] { return received == 3; });
  lock.unlock();
  client.close_sync(std::chrono::seconds(5));  // drains handlers and publishes first
  return all ? 0 : 1;
}
