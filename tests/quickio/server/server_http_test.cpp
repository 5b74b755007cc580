// SPDX-License-Identifier: Apache-2.0
// The in-process server over HTTP long polling: sessions, held polls and the error statuses.
#include <catch2/catch.hpp>

#include "polybus/quickio_testing.hpp"
#include "server_test_client.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::test;
using polybus::quickio::testing::Server;
using polybus::quickio::testing::ServerOptions;

namespace {

const std::string kSid = "16a0dd9a4e554a9f94520c8bfa59e1b9";
const std::string kTarget = "/?sid=" + kSid;

std::optional<HttpResponse> post(Socket& socket, const std::string& target,
                                 const std::string& body) {
  socket.write(http_post(target, body));
  return read_http_response(socket);
}

void open_session(Socket& socket, const Server& server) {
  auto response = post(socket, kTarget + "&connect=true", "/qio/hostname:1=null");
  REQUIRE(response);
  REQUIRE(response->status == 200);
  REQUIRE(response->body ==
          "/qio/callback/1:0={\"code\":200,\"data\":\"" + server.address() + "\"}\n");
}

}  // namespace

TEST_CASE("http: connect=true opens a session answered with the hostname",
          "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  open_session(socket, *server);
  CHECK(server->http_sessions() == 1);
  CHECK(server->connections() == 1);
}

TEST_CASE("http: a newer POST completes the held poll with what is queued",
          "[quickio][server][http]") {
  auto server = Server::launch();
  Socket first(server->port());
  open_session(first, *server);
  first.write(http_post(kTarget, ""));  // held: nothing to say yet
  Socket second(server->port());
  second.write(http_post(kTarget, "/qio/ping:2=null\n/qio/ping:3=null"));
  auto completed = read_http_response(first);
  REQUIRE(completed);
  CHECK(completed->status == 200);
  CHECK(completed->body ==
        "/qio/callback/2:0={\"code\":200,\"data\":null}\n/qio/callback/"
        "3:0={\"code\":200,\"data\":null}\n");
  // The second is now held; a third completes it empty.
  Socket third(server->port());
  third.write(http_post(kTarget, ""));
  auto empty = read_http_response(second);
  REQUIRE(empty);
  CHECK(empty->status == 200);
  CHECK(empty->body.empty());
}

TEST_CASE("http: a held poll carries events published to the session", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  open_session(socket, *server);
  auto subscribed = post(socket, kTarget, "/qio/on:2=\"/feed\"");
  REQUIRE(subscribed);
  CHECK(subscribed->body == "/qio/callback/2:0={\"code\":200,\"data\":null}\n");
  socket.write(http_post(kTarget, ""));  // the long poll
  RawClient publisher(server->port());
  publisher.send("/feed:0={\"n\":1}");
  auto delivered = read_http_response(socket);
  REQUIRE(delivered);
  CHECK(delivered->body == "/feed:0={\"n\":1}\n");
}

TEST_CASE("http: move_all between polls keeps the session until the next POST collects the move",
          "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  open_session(socket, *server);
  auto subscribed = post(socket, kTarget, "/qio/on:2=\"/feed\"");
  REQUIRE(subscribed);
  REQUIRE(subscribed->status == 200);
  server->move_all("elsewhere:1234");   // no poll held: the client is pausing
  CHECK(server->http_sessions() == 0);  // no longer a client of this server ...
  CHECK(server->subscribers("/feed") == 0);
  auto moved = post(socket, kTarget, "/qio/ping:3=null");  // ... until it collects the move
  REQUIRE(moved);
  CHECK(moved->status == 200);
  CHECK(moved->body == "/qio/move:0=\"elsewhere:1234\"\n");
  auto after = post(socket, kTarget, "");
  REQUIRE(after);
  CHECK(after->status == 403);
}

TEST_CASE("http: move_all answers a held poll with the move and ends the session",
          "[quickio][server][http]") {
  auto server = Server::launch();
  Socket first(server->port());
  open_session(first, *server);
  first.write(http_post(kTarget, ""));
  Socket second(server->port());
  second.write(http_post(kTarget, ""));
  // The first poll's answer shows the server holds the second.
  REQUIRE(read_http_response(first));
  server->move_all("elsewhere:1234");
  auto moved = read_http_response(second);
  REQUIRE(moved);
  CHECK(moved->body == "/qio/move:0=\"elsewhere:1234\"\n");
  CHECK(server->http_sessions() == 0);
  auto after = post(first, kTarget, "");
  REQUIRE(after);
  CHECK(after->status == 403);
}

TEST_CASE("http: an idle held poll is answered empty after http_poll_timeout",
          "[quickio][server][http]") {
  ServerOptions options;
  options.http_poll_timeout = std::chrono::milliseconds(50);
  auto server = Server::launch(options);
  Socket socket(server->port());
  open_session(socket, *server);
  auto response = post(socket, kTarget, "");
  REQUIRE(response);
  CHECK(response->status == 200);
  CHECK(response->body.empty());
}

TEST_CASE("http: a session without POSTs is dropped and its sid then refused 403",
          "[quickio][server][http]") {
  ServerOptions options;
  options.http_poll_timeout = std::chrono::milliseconds(20);
  auto server = Server::launch(options);
  Socket socket(server->port());
  open_session(socket, *server);
  // Nothing held and nothing posted: the session goes after 2 * http_poll_timeout.
  Socket later(server->port());
  std::optional<HttpResponse> response;
  auto deadline = std::chrono::steady_clock::now() + polybus::test::kWaitBound;
  while (server->http_sessions() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(server->http_sessions() == 0);
  response = post(later, kTarget, "");
  REQUIRE(response);
  CHECK(response->status == 403);
}

TEST_CASE("http: an unknown sid is 403", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  auto response = post(socket, kTarget, "/qio/ping:1=null");
  REQUIRE(response);
  CHECK(response->status == 403);
}

TEST_CASE("http: a GET without Upgrade is 405", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  socket.write("GET " + kTarget + " HTTP/1.1\r\nHost: x\r\n\r\n");
  auto response = read_http_response(socket);
  REQUIRE(response);
  CHECK(response->status == 405);
}

TEST_CASE("http: a POST without Content-Length is 411", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  socket.write("POST " + kTarget +
               "&connect=true HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  auto response = read_http_response(socket);
  REQUIRE(response);
  CHECK(response->status == 411);
  CHECK(socket.closed_by_server());
}

TEST_CASE("http: a malformed event is 400 and ends the session", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  open_session(socket, *server);
  auto response = post(socket, kTarget, "/qio/ping:1=null\nnot an event");
  REQUIRE(response);
  CHECK(response->status == 400);
  CHECK(server->http_sessions() == 0);
  Socket again(server->port());
  response = post(again, kTarget, "");
  REQUIRE(response);
  CHECK(response->status == 403);
}

TEST_CASE("http: connect needs a 32-hex sid and the hostname body", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket bad_sid(server->port());
  auto response = post(bad_sid, "/?sid=xyz&connect=true", "/qio/hostname:1=null");
  REQUIRE(response);
  CHECK(response->status == 400);
  Socket bad_body(server->port());
  response = post(bad_body, kTarget + "&connect=true", "/qio/ping:1=null");
  REQUIRE(response);
  CHECK(response->status == 400);
  CHECK(server->http_sessions() == 0);
}

TEST_CASE("http: an oversized request head is refused", "[quickio][server][http]") {
  auto server = Server::launch();
  Socket socket(server->port());
  socket.write("POST / HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  auto response = read_http_response(socket);
  REQUIRE(response);
  CHECK(response->status == 431);
}
