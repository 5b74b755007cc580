// SPDX-License-Identifier: Apache-2.0
// The figg and figg-quirks test brokers of polybus::testing.
#include <optional>

#include "polybus/figg_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::figg::testing {

namespace {
class FiggTestBroker : public polybus::testing::TestBroker {
 public:
  FiggTestBroker(BrokerOptions options, std::shared_ptr<polybus::ManualClock> clock)
      : quirks_(options.real_server_quirks),
        broker_(Broker::launch(options)),
        clock_(std::move(clock)) {}
  bool answers_ping() const override { return !quirks_; }
  std::string url() const override {
    return "figg://" + broker_->address() +
           "?reconnect_initial=10ms&reconnect_max=200ms&ping_interval=200ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }
  polybus::testing::Journal* journal() override { return &broker_->journal(); }
  polybus::testing::FaultRules* faults() override { return &broker_->faults(); }
  // Figg's broker has nothing due at a time (retention is by size, pings are answered at once):
  // the clock is kept for the test, and nothing of the broker waits on it.
  std::shared_ptr<polybus::ManualClock> clock() const override { return clock_; }

 private:
  bool quirks_;
  std::unique_ptr<Broker> broker_;
  std::shared_ptr<polybus::ManualClock> clock_;
};
}  // namespace

void register_test_brokers() {
  for (const bool quirks : {false, true}) {
    auto with = [quirks](const polybus::testing::TestBrokerOptions& given) {
      BrokerOptions options;
      options.real_server_quirks = quirks;
      options.port = given.port;
      options.journal_capacity = given.journal_capacity;
      options.faults = given.faults;
      return std::make_unique<FiggTestBroker>(options, given.clock);
    };
    auto on_port = [with](std::uint16_t port) {
      polybus::testing::TestBrokerOptions options;
      options.port = port;
      return with(options);
    };
    polybus::testing::register_test_broker(
        {quirks ? "figg-quirks" : "figg", "figg", [on_port] { return on_port(0); }, on_port, with});
  }
}

}  // namespace polybus::figg::testing
