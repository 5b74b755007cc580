// SPDX-License-Identifier: Apache-2.0
// The in-process QuickIO server (on each carrier) and Figg broker over TLS, registered as test
// brokers so that the whole contract suite runs over TLS too. Each has its own throw-away CA.
#include "tls_brokers.hpp"

#include "polybus/figg_testing.hpp"
#include "polybus/quickio_testing.hpp"
#include "polybus/testing.hpp"
#include "tls_certs.hpp"

namespace polybus::contract {
namespace {

template <typename ServerType, typename ServerOptionsType>
class TlsTestBroker : public testing::TestBroker {
 public:
  TlsTestBroker(std::string scheme, std::string fast_options)
      : scheme_(std::move(scheme)), fast_options_(std::move(fast_options)) {
    ServerOptionsType options;
    options.tls_cert_file = certs_.server_cert_file;
    options.tls_key_file = certs_.server_key_file;
    server_ = ServerType::launch(options);
  }
  std::string url() const override {
    return scheme_ + "://" + server_->address() + "?" + fast_options_ +
           "&tls=true&tls_ca_file=" + certs_.ca_file;
  }
  void stop() override { server_->stop(); }
  void start() override { server_->start(); }
  std::optional<metrics::BrokerMetrics> metrics() const override {
    auto m = server_->metrics();
    m.scheme = scheme_;
    return m;
  }

 private:
  test::TestCertificates certs_;  // before the server, which loads its files
  std::string scheme_;
  std::string fast_options_;
  std::unique_ptr<ServerType> server_;
};

using QuickioTlsBroker = TlsTestBroker<quickio::testing::Server, quickio::testing::ServerOptions>;
using FiggTlsBroker = TlsTestBroker<figg::testing::Broker, figg::testing::BrokerOptions>;

}  // namespace

void register_tls_test_brokers() {
  // The fast options are those of the plain brokers' registrations.
  const std::string quickio_fast = "reconnect_initial=10ms&reconnect_max=200ms";
  for (const std::string scheme : {"quickio", "quickio+ws", "quickio+http"}) {
    std::string fast = quickio_fast;
    if (scheme != "quickio") fast += "&http_poll_delay_max=0ms";
    testing::register_test_broker({scheme + "+tls", scheme, [scheme, fast] {
                                     return std::make_unique<QuickioTlsBroker>(scheme, fast);
                                   }});
  }
  testing::register_test_broker({"figg+tls", "figg", [] {
                                   return std::make_unique<FiggTlsBroker>(
                                       "figg",
                                       "reconnect_initial=10ms&reconnect_max=200ms&"
                                       "ping_interval=200ms");
                                 }});
}

}  // namespace polybus::contract
