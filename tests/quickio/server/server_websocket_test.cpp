// SPDX-License-Identifier: Apache-2.0
// The in-process server over WebSocket: upgrade rules, the QuickIO handshake, text frames only.
#include <catch2/catch.hpp>

#include "polybus/quickio_testing.hpp"
#include "server_test_client.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::test;
using polybus::quickio::testing::Server;
using polybus::quickio::testing::ServerOptions;

TEST_CASE("websocket: the upgrade selects the quickio subprotocol and the handshake completes",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient client(server->port());
  REQUIRE(client.upgrade());
  CHECK(client.upgrade()->status == 101);
  CHECK(client.upgrade()->header("sec-websocket-protocol") == "quickio");
  CHECK(client.upgrade()->header("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  REQUIRE(client.handshake());
  CHECK(server->websocket_connections() == 1);
}

TEST_CASE("websocket: an upgrade without the quickio subprotocol or version 13 is answered 400",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient no_protocol(server->port(), "Sec-WebSocket-Version: 13\r\n");
  REQUIRE(no_protocol.upgrade());
  CHECK(no_protocol.upgrade()->status == 400);
  WsClient other_protocol(server->port(),
                          "Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Version: 13\r\n");
  REQUIRE(other_protocol.upgrade());
  CHECK(other_protocol.upgrade()->status == 400);
  WsClient old_version(server->port(),
                       "Sec-WebSocket-Protocol: quickio\r\nSec-WebSocket-Version: 8\r\n");
  REQUIRE(old_version.upgrade());
  CHECK(old_version.upgrade()->status == 400);
}

TEST_CASE("websocket: refuse_websocket answers every upgrade 400", "[quickio][server][websocket]") {
  ServerOptions options;
  options.refuse_websocket = true;
  auto server = Server::launch(options);
  WsClient client(server->port());
  REQUIRE(client.upgrade());
  CHECK(client.upgrade()->status == 400);
}

TEST_CASE("websocket: a GET with WebSocket headers but no Upgrade is answered 426, a plain GET 405",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  Socket socket(server->port());
  socket.write(
      "GET / HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n");
  auto response = read_http_response(socket);
  REQUIRE(response);
  CHECK(response->status == 426);
  Socket plain(server->port());
  plain.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  response = read_http_response(plain);
  REQUIRE(response);
  CHECK(response->status == 405);
}

TEST_CASE("websocket: masked text frames carry pub/sub between two clients",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient subscriber(server->port());
  WsClient publisher(server->port());
  REQUIRE(subscriber.handshake());
  REQUIRE(publisher.handshake());
  subscriber.send("/qio/on:1=\"/chat\"");
  CHECK(subscriber.next_text() == "/qio/callback/1:0={\"code\":200,\"data\":null}");
  std::string big(300, 'x');
  publisher.send("/chat:0=\"hi\"");
  publisher.send("/chat:0=\"" + big + "\"");
  CHECK(subscriber.next_text() == "/chat:0=\"hi\"");
  CHECK(subscriber.next_text() == "/chat:0=\"" + big + "\"");
}

TEST_CASE("websocket: a raw and a WebSocket client share subscriptions",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient subscriber(server->port());
  REQUIRE(subscriber.handshake());
  subscriber.send("/qio/on:1=\"/mixed\"");
  REQUIRE(subscriber.next_text());
  RawClient publisher(server->port());
  publisher.send("/mixed:0=1");
  CHECK(subscriber.next_text() == "/mixed:0=1");
}

TEST_CASE("websocket: text sent with the handshake, before the answer, is dropped",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient client(server->port());
  client.socket().write(ws_frame(1, kHandshake) + ws_frame(1, "/qio/ping:1=null"));
  REQUIRE(client.next_text() == std::optional<std::string>(kHandshake));
  client.send("/qio/ping:2=null");
  CHECK(client.next_text() == "/qio/callback/2:0={\"code\":200,\"data\":null}");
}

TEST_CASE("websocket: an unmasked frame is closed with 1002", "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient client(server->port());
  REQUIRE(client.handshake());
  client.socket().write(ws_frame(1, "/qio/ping:1=null", false));
  auto frame = client.next();
  REQUIRE(frame);
  CHECK(frame->opcode == 8);
  CHECK(frame->close_code() == 1002);
  CHECK(client.socket().closed_by_server());
}

TEST_CASE("websocket: binary, ping and pong frames are closed with 1003",
          "[quickio][server][websocket]") {
  auto server = Server::launch();
  for (int opcode : {2, 9, 10}) {
    INFO("opcode " << opcode);
    WsClient client(server->port());
    REQUIRE(client.handshake());
    client.socket().write(ws_frame(opcode, "x"));
    auto frame = client.next();
    REQUIRE(frame);
    CHECK(frame->opcode == 8);
    CHECK(frame->close_code() == 1003);
  }
}

TEST_CASE("websocket: invalid UTF-8 is closed with 1007", "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient client(server->port());
  REQUIRE(client.handshake());
  client.send("/p:0=\"\xff\xfe\"");
  auto frame = client.next();
  REQUIRE(frame);
  CHECK(frame->opcode == 8);
  CHECK(frame->close_code() == 1007);
}

TEST_CASE("websocket: a malformed event closes the connection", "[quickio][server][websocket]") {
  auto server = Server::launch();
  WsClient client(server->port());
  REQUIRE(client.handshake());
  client.send("no event here");
  auto frame = client.next();
  REQUIRE(frame);
  CHECK(frame->opcode == 8);
  CHECK(client.socket().closed_by_server());
}

TEST_CASE("websocket: heartbeats are text frames", "[quickio][server][websocket]") {
  ServerOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(30);
  auto server = Server::launch(options);
  WsClient client(server->port());
  REQUIRE(client.handshake());
  auto frame = client.next();
  REQUIRE(frame);
  CHECK(frame->opcode == 1);
  CHECK(frame->payload == "/qio/heartbeat:0=null");
}
