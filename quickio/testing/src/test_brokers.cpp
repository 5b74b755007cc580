// SPDX-License-Identifier: Apache-2.0
// The quickio, quickio+ws and quickio+http test brokers of polybus::testing: one server each,
// with a client URL that reconnects fast and, over HTTP, does not pause before a POST.
#include <optional>

#include "polybus/quickio_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::quickio::testing {

namespace {

ServerOptions server_options(const polybus::testing::TestBrokerOptions& given) {
  ServerOptions options;
  options.port = given.port;
  options.journal_capacity = given.journal_capacity;
  options.faults = given.faults;
  options.clock = given.clock;
  return options;
}

class QuickioTestBroker : public polybus::testing::TestBroker {
 public:
  QuickioTestBroker(std::string scheme, const polybus::testing::TestBrokerOptions& options)
      : scheme_(std::move(scheme)),
        server_(Server::launch(server_options(options))),
        clock_(options.clock) {}
  std::string url() const override {
    std::string url =
        scheme_ + "://" + server_->address() + "?reconnect_initial=10ms&reconnect_max=200ms";
    // No pause before a POST: a test waits for nothing the spec's 0-2 s pause protects (a real
    // server from a crowd of pollers), and each publish would wait one.
    if (scheme_ != "quickio") url += "&http_poll_delay_max=0ms";
    return url;
  }
  void stop() override { server_->stop(); }
  void start() override { server_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override {
    auto m = server_->metrics();
    m.scheme = scheme_;
    return m;
  }
  polybus::testing::Journal* journal() override { return &server_->journal(); }
  polybus::testing::FaultRules* faults() override { return &server_->faults(); }
  std::shared_ptr<polybus::ManualClock> clock() const override { return clock_; }

 private:
  std::string scheme_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<polybus::ManualClock> clock_;
};

}  // namespace

void register_test_brokers() {
  for (const char* scheme : {"quickio", "quickio+ws", "quickio+http"}) {
    std::string name = scheme;
    auto with = [name](const polybus::testing::TestBrokerOptions& options) {
      return std::make_unique<QuickioTestBroker>(name, options);
    };
    auto on_port = [with](std::uint16_t port) {
      polybus::testing::TestBrokerOptions options;
      options.port = port;
      return with(options);
    };
    polybus::testing::register_test_broker(
        {name, name, [with] { return with({}); }, on_port, with});
  }
}

}  // namespace polybus::quickio::testing
