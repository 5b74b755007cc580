// SPDX-License-Identifier: Apache-2.0
// The quickio, quickio+ws and quickio+http test brokers of polybus::testing: one server each,
// with a client URL that reconnects fast and, over HTTP, does not pause before a POST.
#include <optional>

#include "polybus/quickio_testing.hpp"
#include "polybus/testing.hpp"

namespace polybus::quickio::testing {

namespace {

ServerOptions options_on(std::uint16_t port) {
  ServerOptions options;
  options.port = port;
  return options;
}

class QuickioTestBroker : public polybus::testing::TestBroker {
 public:
  QuickioTestBroker(std::string scheme, std::uint16_t port)
      : scheme_(std::move(scheme)), server_(Server::launch(options_on(port))) {}
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

 private:
  std::string scheme_;
  std::unique_ptr<Server> server_;
};

}  // namespace

void register_test_brokers() {
  for (const char* scheme : {"quickio", "quickio+ws", "quickio+http"}) {
    std::string name = scheme;
    polybus::testing::register_test_broker(
        {name, name, [name] { return std::make_unique<QuickioTestBroker>(name, 0); },
         [name](std::uint16_t port) { return std::make_unique<QuickioTestBroker>(name, port); }});
  }
}

}  // namespace polybus::quickio::testing
