// SPDX-License-Identifier: Apache-2.0
// Server-wide operations: move_all, stop and start on the same port, silence, registration.
#include <catch2/catch.hpp>

#include "polybus/quickio_testing.hpp"
#include "polybus/testing.hpp"
#include "server_test_client.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::test;
using polybus::quickio::testing::Server;
using polybus::quickio::testing::ServerOptions;

TEST_CASE("lifecycle: move_all sends /qio/move with the address to every client, then closes",
          "[quickio][server][lifecycle]") {
  auto server = Server::launch();
  RawClient raw(server->port());
  WsClient ws(server->port());
  REQUIRE(ws.handshake());
  Socket http(server->port());
  http.write(
      http_post("/?sid=0123456789abcdef0123456789abcdef&connect=true", "/qio/hostname:1=null"));
  REQUIRE(read_http_response(http));
  http.write(http_post("/?sid=0123456789abcdef0123456789abcdef", ""));
  REQUIRE(server->connections() == 3);

  server->move_all("other.example:4433");
  CHECK(raw.next() == "/qio/move:0=\"other.example:4433\"");
  CHECK(raw.socket().closed_by_server());
  CHECK(ws.next_text() == "/qio/move:0=\"other.example:4433\"");
  auto close = ws.next();
  REQUIRE(close);
  CHECK(close->opcode == 8);
  auto poll = read_http_response(http);
  REQUIRE(poll);
  CHECK(poll->body == "/qio/move:0=\"other.example:4433\"\n");
  CHECK(server->connections() == 0);
}

TEST_CASE("lifecycle: stop closes every connection and start listens on the same port",
          "[quickio][server][lifecycle]") {
  auto server = Server::launch();
  auto port = server->port();
  RawClient client(port);
  REQUIRE(client.handshaken());
  server->stop();
  CHECK(client.socket().closed_by_server());
  CHECK(server->connections() == 0);
  asio::io_context io;
  asio::ip::tcp::socket refused(io);
  std::error_code ec;
  refused.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  CHECK(ec.value() == ECONNREFUSED);
  server->start();
  CHECK(server->port() == port);
  RawClient again(port);
  CHECK(again.handshaken());
  again.send("/qio/ping:1=null");
  CHECK(again.next() == "/qio/callback/1:0={\"code\":200,\"data\":null}");
}

TEST_CASE("lifecycle: a silent server answers nothing and keeps the connection",
          "[quickio][server][lifecycle]") {
  auto server = Server::launch();
  RawClient client(server->port());
  server->set_silent(true);
  client.send("/qio/ping:1=null");
  // The ping was read (the server is not blocked) but not answered; after silence ends the
  // next ping is the first answer.
  client.send("/qio/on:2=\"/x\"");
  auto deadline = std::chrono::steady_clock::now() + polybus::test::kWaitBound;
  while (server->subscribers("/x") == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(server->subscribers("/x") == 1);
  server->set_silent(false);
  client.send("/qio/ping:3=null");
  CHECK(client.next() == "/qio/callback/3:0={\"code\":200,\"data\":null}");
  CHECK(server->connections() == 1);
}

TEST_CASE("lifecycle: broadcast delivers a server event to subscribers",
          "[quickio][server][lifecycle]") {
  auto server = Server::launch();
  RawClient client(server->port());
  client.send("/qio/on:1=\"/srv\"");
  REQUIRE(client.next());
  server->broadcast("/srv", "{\"from\":\"server\"}");
  CHECK(client.next() == "/srv:0={\"from\":\"server\"}");
}

TEST_CASE("lifecycle: register_test_brokers adds quickio, quickio+ws and quickio+http",
          "[quickio][server][lifecycle]") {
  polybus::quickio::testing::register_test_brokers();
  int found = 0;
  for (const auto& factory : polybus::testing::test_brokers()) {
    if (factory.name.rfind("quickio", 0) != 0) continue;
    ++found;
    CHECK(factory.scheme == factory.name);
    auto broker = factory.start();
    std::string url = broker->url();
    CHECK(url.rfind(factory.scheme + "://127.0.0.1:", 0) == 0);
    CHECK(url.find("reconnect_initial=10ms") != std::string::npos);
    CHECK((url.find("http_poll_delay_max=0ms") != std::string::npos) ==
          (factory.name != "quickio"));
  }
  CHECK(found == 3);
}
