// SPDX-License-Identifier: Apache-2.0
#include <atomic>
#include <string>

#include "polybus/mem.hpp"
#include "polybus/mem_testing.hpp"

namespace polybus::mem::testing {
namespace {

using polybus::testing::FaultRule;

class MemTestBroker : public polybus::testing::TestBroker {
 public:
  explicit MemTestBroker(const polybus::testing::TestBrokerOptions& options)
      : journal_(options.journal_capacity), clock_(options.clock) {
    static std::atomic<int> counter{0};
    name_ = "test-" + std::to_string(++counter);
    broker_ = Broker::get(name_);
    for (const FaultRule& rule : options.faults) faults_.add(rule);
    if (clock_) broker_->set_clock(clock_);
    broker_->set_observer([this](const BrokerEvent& observed) { return observe(observed); });
  }
  // The broker lives on under its name: it lets go of what this object owns.
  ~MemTestBroker() override {
    broker_->set_observer(nullptr);
    broker_->set_clock(nullptr);
  }
  std::string url() const override {
    return "mem://" + name_ + "?msg_timeout=500ms&reconnect_initial=5ms&reconnect_max=100ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return broker_->metrics(); }
  polybus::testing::Journal* journal() override { return &journal_; }
  polybus::testing::FaultRules* faults() override { return &faults_; }
  std::shared_ptr<polybus::ManualClock> clock() const override { return clock_; }

 private:
  // Under the broker's lock: records, and says which fault applies.
  BrokerFault observe(const BrokerEvent& observed) {
    if (journal_.enabled()) {
      polybus::testing::JournalEntry entry;
      entry.connection = observed.session;
      entry.received = observed.received;
      entry.kind = observed.kind;
      entry.topic = observed.topic;
      entry.channel = observed.group;
      if (observed.id != 0) entry.id = std::to_string(observed.id);
      entry.count = observed.count;
      entry.bytes = observed.bytes;
      journal_.record(std::move(entry));
    }
    if (faults_.empty()) return {};
    const auto rule =
        faults_.fire({observed.kind, observed.topic, observed.group, observed.session});
    if (!rule) return {};
    using Action = BrokerFault::Action;
    BrokerFault fault;
    fault.fatal = rule->fatal;
    fault.delay = rule->delay;
    switch (rule->action) {
      case FaultRule::Action::error:
        fault.action = Action::error;
        break;
      case FaultRule::Action::swallow:
      // No connection output to hold: a held delivery is withheld, and comes again after its
      // ack timeout.
      case FaultRule::Action::hold:
        fault.action = Action::swallow;
        break;
      case FaultRule::Action::delay:
        fault.action = Action::delay;
        break;
      case FaultRule::Action::close:
      case FaultRule::Action::reset:
        fault.action = Action::close;
        break;  // no socket to reset
      case FaultRule::Action::duplicate:
        fault.action = Action::duplicate;
        break;
    }
    return fault;
  }

  std::string name_;
  std::shared_ptr<Broker> broker_;
  polybus::testing::Journal journal_;
  polybus::testing::FaultRules faults_;
  std::shared_ptr<polybus::ManualClock> clock_;
};

}  // namespace

std::unique_ptr<polybus::testing::TestBroker> start_broker(
    const polybus::testing::TestBrokerOptions& options) {
  if (options.port != 0) throw std::invalid_argument("mem test broker: mem:// listens on no port");
  return std::make_unique<MemTestBroker>(options);
}

void register_test_brokers() {
  polybus::testing::register_test_broker({"mem",
                                          "mem",
                                          [] { return start_broker(); },
                                          {},
                                          [](const auto& o) { return start_broker(o); }});
}

}  // namespace polybus::mem::testing
