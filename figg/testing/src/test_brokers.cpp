// SPDX-License-Identifier: Apache-2.0
// The figg and figg-quirks test brokers of polybus::testing.
#include <optional>

#include "polybus/figg_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::figg::testing {

namespace {
class FiggTestBroker : public polybus::testing::TestBroker {
 public:
  explicit FiggTestBroker(BrokerOptions options)
      : quirks_(options.real_server_quirks), broker_(Broker::launch(options)) {}
  bool answers_ping() const override { return !quirks_; }
  std::string url() const override {
    return "figg://" + broker_->address() +
           "?reconnect_initial=10ms&reconnect_max=200ms&ping_interval=200ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }

 private:
  bool quirks_;
  std::unique_ptr<Broker> broker_;
};
}  // namespace

void register_test_brokers() {
  for (const bool quirks : {false, true}) {
    auto on_port = [quirks](std::uint16_t port) {
      BrokerOptions options;
      options.real_server_quirks = quirks;
      options.port = port;
      return std::make_unique<FiggTestBroker>(options);
    };
    polybus::testing::register_test_broker(
        {quirks ? "figg-quirks" : "figg", "figg", [on_port] { return on_port(0); }, on_port});
  }
}

}  // namespace polybus::figg::testing
