// SPDX-License-Identifier: Apache-2.0
#include <atomic>

#include "polybus/mem.hpp"
#include "polybus/mem_testing.hpp"

namespace polybus::mem::testing {
namespace {

class MemTestBroker : public polybus::testing::TestBroker {
 public:
  MemTestBroker() {
    static std::atomic<int> counter{0};
    name_ = "test-" + std::to_string(++counter);
    broker_ = Broker::get(name_);
  }
  std::string url() const override {
    return "mem://" + name_ + "?msg_timeout=500ms&reconnect_initial=5ms&reconnect_max=100ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }

 private:
  std::string name_;
  std::shared_ptr<Broker> broker_;
};

}  // namespace

std::unique_ptr<polybus::testing::TestBroker> start_broker() {
  return std::make_unique<MemTestBroker>();
}

void register_test_brokers() {
  polybus::testing::register_test_broker({"mem", "mem", start_broker});
}

}  // namespace polybus::mem::testing
