// SPDX-License-Identifier: Apache-2.0
// Requests (events with a callback id) relayed to one subscriber as server callbacks, and what
// the requester hears back: the answer, 404, 500 on expiry or disconnect.
#include <catch2/catch.hpp>

#include "polybus/quickio_testing.hpp"
#include "polybus/text/text.hpp"
#include "server_test_client.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::test;
using polybus::quickio::testing::Server;
using polybus::quickio::testing::ServerOptions;
using polybus::text::json_quote;

namespace {

void subscribe(RawClient& client, const std::string& path) {
  client.send("/qio/on:1=" + json_quote(path));
  REQUIRE(client.next() == "/qio/callback/1:0={\"code\":200,\"data\":null}");
}

Event parsed(const std::optional<std::string>& text, std::string& storage) {
  REQUIRE(text);
  storage = *text;
  Event event;
  REQUIRE_FALSE(parse_event(storage, event));
  return event;
}

}  // namespace

TEST_CASE("callbacks: a request is relayed to a subscriber and its answer to the requester",
          "[quickio][server][callbacks]") {
  auto server = Server::launch();
  RawClient responder(server->port());
  RawClient requester(server->port());
  subscribe(responder, "/svc");
  requester.send("/svc:5={\"q\":1}");
  std::string text;
  Event request = parsed(responder.next(), text);
  CHECK(request.path == "/svc");
  CHECK(request.json == "{\"q\":1}");
  REQUIRE(request.callback_id != 0);
  responder.send(callback_path(request.callback_id) +
                 ":0={\"code\":201,\"data\":\"ok\",\"err_msg\":\"noted\"}");
  CHECK(requester.next() ==
        "/qio/callback/5:0={\"code\":201,\"data\":\"ok\",\"err_msg\":\"noted\"}");

  requester.send("/svc:6=2");
  request = parsed(responder.next(), text);
  responder.send(callback_path(request.callback_id) + ":0={\"code\":200,\"data\":[1,2]}");
  CHECK(requester.next() == "/qio/callback/6:0={\"code\":200,\"data\":[1,2]}");
}

TEST_CASE("callbacks: requests go round robin over the subscribers",
          "[quickio][server][callbacks]") {
  auto server = Server::launch();
  RawClient first(server->port());
  RawClient second(server->port());
  RawClient requester(server->port());
  subscribe(first, "/svc");
  subscribe(second, "/svc");
  requester.send("/svc:1=\"a\"");
  requester.send("/svc:2=\"b\"");
  std::string t1, t2;
  Event one = parsed(first.next(), t1);
  Event two = parsed(second.next(), t2);
  CHECK(one.json != two.json);
}

TEST_CASE("callbacks: a request without subscriber is answered 404",
          "[quickio][server][callbacks]") {
  auto server = Server::launch();
  RawClient requester(server->port());
  requester.send("/nobody:3=null");
  CHECK(requester.next() ==
        "/qio/callback/3:0={\"code\":404,\"data\":null,\"err_msg\":\"no subscriber\"}");
}

TEST_CASE("callbacks: an unanswered request expires with 500", "[quickio][server][callbacks]") {
  ServerOptions options;
  options.callback_expiry = std::chrono::milliseconds(50);
  auto server = Server::launch(options);
  RawClient responder(server->port());
  RawClient requester(server->port());
  subscribe(responder, "/svc");
  requester.send("/svc:4=null");
  REQUIRE(responder.next());
  CHECK(requester.next() ==
        "/qio/callback/4:0={\"code\":500,\"data\":null,\"err_msg\":\"callback expired\"}");
}

TEST_CASE("callbacks: a responder that disconnects fails its requests with 500",
          "[quickio][server][callbacks]") {
  auto server = Server::launch();
  RawClient requester(server->port());
  {
    RawClient responder(server->port());
    subscribe(responder, "/svc");
    requester.send("/svc:8=null");
    REQUIRE(responder.next());
  }
  CHECK(requester.next() ==
        "/qio/callback/8:0={\"code\":500,\"data\":null,\"err_msg\":\"disconnected\"}");
}

TEST_CASE("callbacks: at most max_pending_server_callbacks are outstanding, the rest wait",
          "[quickio][server][callbacks]") {
  ServerOptions options;
  options.max_pending_server_callbacks = 2;
  auto server = Server::launch(options);
  RawClient responder(server->port());
  RawClient requester(server->port());
  subscribe(responder, "/svc");
  for (int i = 1; i <= 3; ++i)
    requester.send("/svc:" + std::to_string(i) + "=" + std::to_string(i));
  std::string t1, t2, t3;
  Event first = parsed(responder.next(), t1);
  Event second = parsed(responder.next(), t2);
  CHECK(first.json == "1");
  CHECK(second.json == "2");
  CHECK(first.callback_id != second.callback_id);
  // The third comes only when a slot is freed.
  responder.send(callback_path(second.callback_id) + ":0={\"code\":200,\"data\":\"two\"}");
  CHECK(requester.next() == "/qio/callback/2:0={\"code\":200,\"data\":\"two\"}");
  Event third = parsed(responder.next(), t3);
  CHECK(third.json == "3");
  CHECK((third.callback_id >> 16) == (second.callback_id >> 16));  // the freed slot
  CHECK(third.callback_id != second.callback_id);                  // a new sequence number
  // An answer to a stale id is ignored.
  responder.send(callback_path(second.callback_id) + ":0={\"code\":200,\"data\":\"stale\"}");
  responder.send(callback_path(first.callback_id) + ":0={\"code\":200,\"data\":\"one\"}");
  CHECK(requester.next() == "/qio/callback/1:0={\"code\":200,\"data\":\"one\"}");
}

TEST_CASE("callbacks: requests over the waiting bound are answered 500",
          "[quickio][server][callbacks]") {
  ServerOptions options;
  options.max_pending_server_callbacks = 1;
  auto server = Server::launch(options);
  RawClient responder(server->port());
  RawClient requester(server->port());
  subscribe(responder, "/svc");
  std::string burst;
  // One outstanding, 1024 waiting, and one more that does not fit.
  for (int i = 1; i <= 1 + 1024 + 1; ++i)
    append_raw_frame(burst, "/svc:" + std::to_string(i) + "=null");
  requester.socket().write(burst);
  CHECK(requester.next() ==
        "/qio/callback/1026:0={\"code\":500,\"data\":null,\"err_msg\":\"too many pending "
        "callbacks\"}");
}

TEST_CASE("callbacks: on a manual clock an unanswered request expires as the test advances it",
          "[quickio][server][callbacks][clock]") {
  ServerOptions options;
  options.callback_expiry = std::chrono::seconds(30);
  options.clock = std::make_shared<polybus::ManualClock>();
  options.journal_capacity = 100;
  auto server = Server::launch(options);
  RawClient responder(server->port());
  RawClient requester(server->port());
  subscribe(responder, "/svc");
  requester.send("/svc:4=null");
  REQUIRE(responder.next());
  const auto answers = [&] {
    return server->journal()
        .entries([](const polybus::testing::JournalEntry& e) {
          return !e.received && e.kind == "/qio/callback";
        })
        .size();
  };
  const auto before = answers();  // the subscription's
  options.clock->advance(std::chrono::milliseconds(29'999));
  CHECK(answers() == before);
  options.clock->advance(std::chrono::milliseconds(1));
  CHECK(answers() == before + 1);  // answered before advance() returned
  CHECK(requester.next() ==
        "/qio/callback/4:0={\"code\":500,\"data\":null,\"err_msg\":\"callback expired\"}");
}
