// SPDX-License-Identifier: Apache-2.0
// QuickIO over TLS on every carrier (raw, WebSocket, HTTP long polling): the in-process server
// with a certificate from the test CA, and polybus::connect with ?tls=true.
#include <catch2/catch.hpp>

#include "ping_result.hpp"
#include "polybus/client.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio.hpp"
#include "polybus/quickio_testing.hpp"
#include "test_support.hpp"
#include "tls_certs.hpp"

namespace {

using namespace polybus;
using namespace polybus::test;
using quickio::testing::Server;
using quickio::testing::ServerOptions;

const std::string kFast = "?reconnect_initial=20ms&reconnect_max=200ms&http_poll_delay_max=20ms";

std::unique_ptr<Server> launch_tls_server(const TestCertificates& certs) {
  ServerOptions options;
  options.tls_cert_file = certs.server_cert_file;
  options.tls_key_file = certs.server_key_file;
  return Server::launch(options);
}

std::string tls_url(const std::string& scheme, const Server& server, const std::string& ca_file) {
  quickio::register_scheme();
  return scheme + "://" + server.address() + kFast + "&tls=true&tls_ca_file=" + ca_file;
}

}  // namespace

TEST_CASE("tls: a publish reaches a subscriber and a request gets its reply over TLS") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  TestCertificates certs;
  auto server = launch_tls_server(certs);
  auto subscriber = connect(tls_url(scheme, *server, certs.ca_file));
  auto publisher = connect(tls_url(scheme, *server, certs.ca_file));
  Collector got;
  auto sub =
      subscriber.subscribe("secure", {}, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  auto serving = subscriber.serve("upper", [](Message& m) {
    std::string text(m.payload());
    for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
  });
  REQUIRE(serving.wait_ready(kWaitBound) == std::error_code{});

  REQUIRE(publisher.publish_sync("secure", "over tls") == std::error_code{});
  REQUIRE(got.wait_for_count(1));
  CHECK(got.order() == std::vector<std::string>{"over tls"});
  auto reply = publisher.request_sync("upper", "shout", std::chrono::seconds(10));
  REQUIRE(reply.ec == std::error_code{});
  CHECK(reply.payload == "SHOUT");
  CHECK(publisher.stats().reconnects == 0);
}

TEST_CASE(
    "tls: a client verifying against another CA fails with tls_error naming the address "
    "and the verification, and backs off") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  TestCertificates certs;
  auto server = launch_tls_server(certs);
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto client = connect(tls_url(scheme, *server, certs.other_ca_file), options);

  auto failed = states.wait_for([](const StateEvent& e) {
    return e.state == ConnectionState::disconnected && e.reason == errc::tls_error;
  });
  REQUIRE(failed);
  const StateEvent failure = states.at(*failed);
  CHECK_THAT(failure.detail, Catch::Contains(server->address()));
  CHECK_THAT(failure.detail, Catch::Contains("certificate verify failed"));
  // The next attempt waits for the backoff rather than spinning.
  auto retry = states.wait_for(
      [](const StateEvent& e) { return e.state == ConnectionState::reconnecting; }, *failed);
  REQUIRE(retry);
  CHECK(states.at(*retry).retry_in > std::chrono::milliseconds(0));
  CHECK(ping_result(client, std::chrono::milliseconds(500)) != std::error_code{});
  CHECK(server->connections() == 0);
}

TEST_CASE("tls: a plain client against the TLS server fails within its deadline") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  TestCertificates certs;
  auto server = launch_tls_server(certs);
  quickio::register_scheme();
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto client = connect(scheme + "://" + server->address() + kFast, options);

  // The server reads the client's first bytes as a TLS hello and closes the connection.
  REQUIRE(states.wait_for(
      [](const StateEvent& e) { return e.state == ConnectionState::disconnected && e.reason; }));
  const auto deadline = std::chrono::milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  CHECK(ping_result(client, deadline) != std::error_code{});
  CHECK(std::chrono::steady_clock::now() - start < deadline + std::chrono::seconds(5));
  CHECK(server->connections() == 0);
  CHECK(client.stats().reconnects == 0);  // never up, so never a reconnect
}

TEST_CASE("tls: what the server writes just before it closes reaches the client") {
  // /qio/move is written and the connection closed after it: only a client that read the move
  // through TLS's end of stream connects to the target (the first server still listens).
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  TestCertificates certs;
  auto server = launch_tls_server(certs);
  auto target = launch_tls_server(certs);
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto client = connect(tls_url(scheme, *server, certs.ca_file), options);
  REQUIRE(ping_result(client, kWaitBound) == std::error_code{});
  server->move_all(target->address());
  const std::string moved_to = target->address();
  REQUIRE(states.wait_for([&](const StateEvent& e) {
    return e.state == ConnectionState::connected && e.endpoint == moved_to;
  }));
  CHECK(ping_result(client, kWaitBound) == std::error_code{});
}
