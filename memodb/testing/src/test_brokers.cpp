// SPDX-License-Identifier: Apache-2.0
// The memodb+tcp and memodb+ipc test brokers of polybus::testing: the broker with fast timings,
// and the same numbers in the client's URL so that its resend times match.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "polybus/memodb_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::memodb::testing {

namespace {

// Fast broker timings, and the same numbers in the client's options so its resend times match.
BrokerOptions fast_options(std::string url, const polybus::testing::TestBrokerOptions& given) {
  BrokerOptions options;
  options.url = std::move(url);
  options.journal_capacity = given.journal_capacity;
  options.faults = given.faults;
  options.clock = given.clock;
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
  MemoDbTestBroker(std::string url, const polybus::testing::TestBrokerOptions& options)
      : broker_(Broker::launch(fast_options(std::move(url), options))), clock_(options.clock) {}
  std::string url() const override { return "memodb+" + broker_->url() + kFastQuery; }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  bool answers_ping() const override { return false; }  // memo01 has no ping
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }
  polybus::testing::Journal* journal() override { return &broker_->journal(); }
  polybus::testing::FaultRules* faults() override { return &broker_->faults(); }
  std::shared_ptr<polybus::ManualClock> clock() const override { return clock_; }

 private:
  std::unique_ptr<Broker> broker_;
  std::shared_ptr<polybus::ManualClock> clock_;
};

std::string temp_ipc_url() {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::string base = dir && *dir ? dir : "/tmp";
  return "ipc://" + base + "/polybus-memodb-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter) + ".ipc";
}

std::unique_ptr<polybus::testing::TestBroker> over_tcp(
    const polybus::testing::TestBrokerOptions& options) {
  return std::make_unique<MemoDbTestBroker>(
      options.port == 0 ? std::string() : "tcp://127.0.0.1:" + std::to_string(options.port),
      options);
}

std::unique_ptr<polybus::testing::TestBroker> over_ipc(
    const polybus::testing::TestBrokerOptions& options) {
  if (options.port != 0)
    throw std::invalid_argument("memodb+ipc test broker: ipc:// listens on no port");
  return std::make_unique<MemoDbTestBroker>(temp_ipc_url(), options);
}

}  // namespace

void register_test_brokers() {
  polybus::testing::register_test_broker({"memodb+tcp", "memodb+tcp", [] { return over_tcp({}); },
                                          [](std::uint16_t port) {
                                            polybus::testing::TestBrokerOptions options;
                                            options.port = port;
                                            return over_tcp(options);
                                          },
                                          over_tcp});
  polybus::testing::register_test_broker(
      {"memodb+ipc", "memodb+ipc", [] { return over_ipc({}); }, {}, over_ipc});
}

}  // namespace polybus::memodb::testing
