// SPDX-License-Identifier: Apache-2.0
// The memodb+tcp and memodb+ipc test brokers of polybus::testing: the broker with fast timings,
// and the same numbers in the client's URL so that its resend times match.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <optional>

#include "polybus/memodb_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::memodb::testing {

namespace {

// Fast broker timings, and the same numbers in the client's options so its resend times match.
BrokerOptions fast_options(std::string url) {
  BrokerOptions options;
  options.url = std::move(url);
  options.heartbeat_interval = std::chrono::milliseconds(2000);
  options.heartbeat_timeout = std::chrono::milliseconds(2000);
  options.queue_timeout = std::chrono::milliseconds(5000);
  return options;
}

const char* const kFastQuery =
    "?heartbeat_interval=2s&heartbeat_timeout=2s&queue_timeout=5s"
    "&reconnect_initial=10ms&reconnect_max=200ms";

class MemoDbTestBroker : public polybus::testing::TestBroker {
 public:
  explicit MemoDbTestBroker(std::string url)
      : broker_(Broker::launch(fast_options(std::move(url)))) {}
  std::string url() const override { return "memodb+" + broker_->url() + kFastQuery; }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  bool answers_ping() const override { return false; }  // memo01 has no ping
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }

 private:
  std::unique_ptr<Broker> broker_;
};

std::string temp_ipc_url() {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::string base = dir && *dir ? dir : "/tmp";
  return "ipc://" + base + "/polybus-memodb-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter) + ".ipc";
}

}  // namespace

void register_test_brokers() {
  polybus::testing::register_test_broker(
      {"memodb+tcp", "memodb+tcp", [] { return std::make_unique<MemoDbTestBroker>(std::string()); },
       [](std::uint16_t port) {
         return std::make_unique<MemoDbTestBroker>("tcp://127.0.0.1:" + std::to_string(port));
       }});
  polybus::testing::register_test_broker(
      {"memodb+ipc", "memodb+ipc",
       [] { return std::make_unique<MemoDbTestBroker>(temp_ipc_url()); }});
}

}  // namespace polybus::memodb::testing
