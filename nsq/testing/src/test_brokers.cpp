// SPDX-License-Identifier: Apache-2.0
// The NSQ test brokers for the contract suite and `polybus demo`: "nsq" (one nsqd) and
// "nsq+lookupd" (an nsqlookupd with one nsqd registered). Their URLs carry only options the NSQ
// adapter declares, set to keep tests fast: msg_timeout 1 s (nsqd's minimum for a client), quick
// reconnects and a short RDY backoff after failures.
#include <mutex>

#include "polybus/nsq_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::nsq::testing {
namespace {

constexpr const char* kFastOptions =
    "reconnect_initial=10ms&reconnect_max=200ms&msg_timeout=1s&backoff_multiplier=10ms";

using polybus::testing::TestBrokerOptions;

// The nsqd of either broker: the common options; the port is the URL's only for "nsq".
NsqdOptions nsqd_options(const TestBrokerOptions& given, std::uint16_t port) {
  NsqdOptions options;
  options.tcp_port = port;
  options.journal_capacity = given.journal_capacity;
  options.faults = given.faults;
  options.clock = given.clock;
  return options;
}

TestBrokerOptions on_port(std::uint16_t port) {
  TestBrokerOptions options;
  options.port = port;
  return options;
}

class NsqdTestBroker : public polybus::testing::TestBroker {
 public:
  explicit NsqdTestBroker(const TestBrokerOptions& options)
      : nsqd_(Nsqd::start(nsqd_options(options, options.port))) {}
  std::string url() const override { return "nsq://" + nsqd_->tcp_address() + "?" + kFastOptions; }
  void stop() override { nsqd_->stop(); }
  void start() override { nsqd_->resume(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return nsqd_->metrics(); }
  polybus::testing::Journal* journal() override { return &nsqd_->journal(); }
  polybus::testing::FaultRules* faults() override { return &nsqd_->faults(); }
  std::shared_ptr<polybus::ManualClock> clock() const override { return nsqd_->options().clock; }

 private:
  std::unique_ptr<Nsqd> nsqd_;
};

class LookupdTestBroker : public polybus::testing::TestBroker {
 public:
  // The port is the lookupd's (the URL's); the nsqd takes a free one.
  explicit LookupdTestBroker(const TestBrokerOptions& options)
      : lookupd_(Lookupd::start(options.port)), nsqd_(Nsqd::start(nsqd_options(options, 0))) {
    nsqd_->register_with(*lookupd_);
  }
  std::string url() const override {
    return "nsq+lookupd://" + lookupd_->http_address() + "?lookupd_poll_interval=100ms&" +
           kFastOptions;
  }
  // The nsqd goes and comes back; the lookupd stays, as in a deployment.
  void stop() override { nsqd_->stop(); }
  void start() override { nsqd_->resume(); }
  // The nsqd's traffic: the lookupd carries no messages.
  std::optional<metrics::BrokerMetrics> metrics() const override {
    auto m = nsqd_->metrics();
    m.scheme = "nsq+lookupd";
    return m;
  }
  // The nsqd's: the lookupd carries no messages.
  polybus::testing::Journal* journal() override { return &nsqd_->journal(); }
  polybus::testing::FaultRules* faults() override { return &nsqd_->faults(); }
  std::shared_ptr<polybus::ManualClock> clock() const override { return nsqd_->options().clock; }

 private:
  std::unique_ptr<Lookupd> lookupd_;
  std::unique_ptr<Nsqd> nsqd_;
};

}  // namespace

void register_test_brokers() {
  static std::once_flag once;
  std::call_once(once, [] {
    polybus::testing::register_test_broker(
        {"nsq", "nsq", [] { return std::make_unique<NsqdTestBroker>(on_port(0)); },
         [](std::uint16_t port) { return std::make_unique<NsqdTestBroker>(on_port(port)); },
         [](const TestBrokerOptions& options) {
           return std::make_unique<NsqdTestBroker>(options);
         }});
    polybus::testing::register_test_broker(
        {"nsq+lookupd", "nsq+lookupd",
         [] { return std::make_unique<LookupdTestBroker>(on_port(0)); },
         [](std::uint16_t port) { return std::make_unique<LookupdTestBroker>(on_port(port)); },
         [](const TestBrokerOptions& options) {
           return std::make_unique<LookupdTestBroker>(options);
         }});
  });
}

}  // namespace polybus::nsq::testing
