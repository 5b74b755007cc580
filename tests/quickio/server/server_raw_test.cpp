// SPDX-License-Identifier: Apache-2.0
// The in-process server over raw TCP: handshake, pub/sub, built-ins and malformed input.
#include <catch2/catch.hpp>

#include "polybus/quickio_testing.hpp"
#include "server_test_client.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::test;
using polybus::quickio::testing::Server;
using polybus::quickio::testing::ServerOptions;

namespace {
const std::string kOk = "{\"code\":200,\"data\":null}";
}

TEST_CASE("raw: the server answers /qio/ohai with /qio/ohai and counts the client",
          "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient client(server->port());
  REQUIRE(client.handshaken());
  CHECK(server->raw_connections() == 1);
  CHECK(server->connections() == 1);
}

TEST_CASE("raw: an event reaches every subscriber of exactly its path", "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient subscriber(server->port());
  RawClient other(server->port());
  RawClient publisher(server->port());
  subscriber.send("/qio/on:1=\"/news\"");
  CHECK(subscriber.next() == "/qio/callback/1:0=" + kOk);
  other.send("/qio/on:7=[\"/news/sport\",{\"extra\":true}]");
  CHECK(other.next() == "/qio/callback/7:0=" + kOk);
  CHECK(server->subscribers("/news") == 1);

  publisher.send("/news:0={\"headline\":1}");
  publisher.send("/news/sport:0=2");
  CHECK(subscriber.next() == "/news:0={\"headline\":1}");
  CHECK(other.next() == "/news/sport:0=2");
  // Order per connection is kept.
  for (int i = 0; i < 100; ++i) publisher.send("/news:0=" + std::to_string(i));
  for (int i = 0; i < 100; ++i) REQUIRE(subscriber.next() == "/news:0=" + std::to_string(i));
}

TEST_CASE("raw: /qio/off unsubscribes and answers 200 even when not subscribed",
          "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient client(server->port());
  client.send("/qio/on:1=\"/a\"");
  CHECK(client.next() == "/qio/callback/1:0=" + kOk);
  client.send("/qio/off:2=\"/a\"");
  CHECK(client.next() == "/qio/callback/2:0=" + kOk);
  CHECK(server->subscribers("/a") == 0);
  client.send("/qio/off:3=\"/never\"");
  CHECK(client.next() == "/qio/callback/3:0=" + kOk);
}

TEST_CASE("raw: ping, hostname and unknown /qio events are answered", "[quickio][server][raw]") {
  ServerOptions options;
  options.public_hostname = "qio.example:1234";
  auto server = Server::launch(options);
  RawClient client(server->port());
  client.send("/qio/ping:1=null");
  CHECK(client.next() == "/qio/callback/1:0=" + kOk);
  client.send("/qio/hostname:2=null");
  CHECK(client.next() == "/qio/callback/2:0={\"code\":200,\"data\":\"qio.example:1234\"}");
  client.send("/qio/nope:3=null");
  CHECK(client.next() ==
        "/qio/callback/3:0={\"code\":404,\"data\":null,\"err_msg\":\"unknown event\"}");
}

TEST_CASE("raw: hostname defaults to 127.0.0.1 and the port", "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient client(server->port());
  client.send("/qio/hostname:9=null");
  CHECK(client.next() == "/qio/callback/9:0={\"code\":200,\"data\":\"" + server->address() + "\"}");
}

TEST_CASE("raw: /qio/on answers 400 for a bad path and 420 over max_subscriptions",
          "[quickio][server][raw]") {
  ServerOptions options;
  options.max_subscriptions = 2;
  auto server = Server::launch(options);
  RawClient client(server->port());
  client.send("/qio/on:1=\"no slash\"");
  CHECK(client.next() == "/qio/callback/1:0={\"code\":400,\"data\":null,\"err_msg\":\"bad path\"}");
  client.send("/qio/on:2=42");
  CHECK(client.next() == "/qio/callback/2:0={\"code\":400,\"data\":null,\"err_msg\":\"bad path\"}");
  client.send("/qio/on:3=\"/one\"");
  CHECK(client.next() == "/qio/callback/3:0=" + kOk);
  client.send("/qio/on:4=\"/two\"");
  CHECK(client.next() == "/qio/callback/4:0=" + kOk);
  client.send("/qio/on:5=\"/one\"");  // already subscribed: not a new one
  CHECK(client.next() == "/qio/callback/5:0=" + kOk);
  client.send("/qio/on:6=\"/three\"");
  CHECK(client.next() ==
        "/qio/callback/6:0={\"code\":420,\"data\":null,\"err_msg\":\"too many subscriptions\"}");
}

TEST_CASE("raw: events sent with the handshake, before the answer, are dropped",
          "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient client(server->port(), false);
  std::string bytes(kHandshake);
  append_raw_frame(bytes, "/qio/ping:1=null");
  client.socket().write(bytes);
  REQUIRE(client.socket().read(kHandshake.size()) == std::optional<std::string>(kHandshake));
  client.send("/qio/ping:2=null");
  CHECK(client.next() == "/qio/callback/2:0=" + kOk);
}

TEST_CASE("raw: a malformed event closes the connection", "[quickio][server][raw]") {
  auto server = Server::launch();
  RawClient client(server->port());
  client.send("/path-without-callback-id");
  CHECK(client.socket().closed_by_server());
}

TEST_CASE("raw: a frame over max_event_size closes the connection", "[quickio][server][raw]") {
  ServerOptions options;
  options.max_event_size = 64;
  auto server = Server::launch(options);
  RawClient client(server->port());
  client.socket().write(std::string("\x7f\xff\xff\xff\xff\xff\xff\xff", 8));
  CHECK(client.socket().closed_by_server());
}

TEST_CASE("raw: bytes that are no QuickIO handshake close the connection",
          "[quickio][server][raw]") {
  auto server = Server::launch();
  Socket socket(server->port());
  socket.write("/qio/hello");
  CHECK(socket.closed_by_server());
}

TEST_CASE("raw: a heartbeat is sent after heartbeat_interval without traffic",
          "[quickio][server][raw]") {
  ServerOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(30);
  auto server = Server::launch(options);
  RawClient client(server->port());
  CHECK(client.next() == "/qio/heartbeat:0=null");
  CHECK(client.next() == "/qio/heartbeat:0=null");
}

TEST_CASE("raw: a silent client is challenged and closed when it does not answer",
          "[quickio][server][raw]") {
  ServerOptions options;
  options.challenge_after = std::chrono::milliseconds(30);
  options.challenge_timeout = std::chrono::milliseconds(60);
  auto server = Server::launch(options);
  RawClient client(server->port());
  auto challenge = client.next_non_heartbeat();
  REQUIRE(challenge);
  Event event;
  REQUIRE_FALSE(parse_event(*challenge, event));
  CHECK(event.path == "/qio/heartbeat");
  CHECK(event.callback_id != 0);
  CHECK(client.socket().closed_by_server());
}

TEST_CASE("raw: answering the challenge keeps the connection", "[quickio][server][raw]") {
  ServerOptions options;
  options.challenge_after = std::chrono::milliseconds(30);
  options.challenge_timeout = std::chrono::milliseconds(200);
  auto server = Server::launch(options);
  RawClient client(server->port());
  for (int round = 0; round < 3; ++round) {
    auto challenge = client.next_non_heartbeat();
    REQUIRE(challenge);
    Event event;
    REQUIRE_FALSE(parse_event(*challenge, event));
    REQUIRE(event.path == "/qio/heartbeat");
    REQUIRE(event.callback_id != 0);
    client.send(callback_path(event.callback_id) + ":0=" + kOk);
  }
  // Still open: a ping is answered after three challenges, each answered in time.
  client.send("/qio/ping:1=null");
  CHECK(client.next_non_heartbeat().value_or("").rfind("/qio/", 0) == 0);
}
