// SPDX-License-Identifier: Apache-2.0
#include "envelope_brokers.hpp"

#include "polybus/testing.hpp"

namespace polybus::contract {
namespace {

// The plain broker, with the envelope in its URL.
class EnvelopeBroker : public testing::TestBroker {
 public:
  explicit EnvelopeBroker(std::unique_ptr<testing::TestBroker> plain) : plain_(std::move(plain)) {}
  std::string url() const override {
    const std::string url = plain_->url();
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "envelope=cloudevents";
  }
  void stop() override { plain_->stop(); }
  void start() override { plain_->start(); }
  bool answers_ping() const override { return plain_->answers_ping(); }
  std::optional<metrics::BrokerMetrics> metrics() const override { return plain_->metrics(); }

 private:
  std::unique_ptr<testing::TestBroker> plain_;
};

}  // namespace

const std::vector<std::pair<std::string, std::string>>& envelope_variants() {
  static const std::vector<std::pair<std::string, std::string>> variants = {
      {"nsq", "nsq+cloudevents"},
      {"figg", "figg+cloudevents"},
      {"nsq-real", "nsq-real+cloudevents"},
      {"figg-real", "figg-real+cloudevents"},
  };
  return variants;
}

void register_envelope_test_brokers() {
  const auto registered = testing::test_brokers();
  for (const auto& [plain, variant] : envelope_variants())
    for (const auto& factory : registered)
      if (factory.name == plain)
        testing::register_test_broker({variant, factory.scheme, [start = factory.start] {
                                         return std::make_unique<EnvelopeBroker>(start());
                                       }});
}

}  // namespace polybus::contract
