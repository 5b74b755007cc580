// SPDX-License-Identifier: Apache-2.0
// The native client against the in-process server, over each transport.
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "polybus/error.hpp"
#include "polybus/quickio/client.hpp"
#include "polybus/quickio_testing.hpp"
#include "test_support.hpp"

namespace {

using namespace polybus::quickio;
using namespace polybus::test;
using testing::Server;
using testing::ServerOptions;

const std::string kFast = "?reconnect_initial=20ms&reconnect_max=200ms&http_poll_delay_max=20ms";

std::string url_for(const std::string& scheme, const Server& server,
                    const std::string& extra = "") {
  return scheme + "://" + server.address() + kFast + extra;
}

// Counts /open and /close; waits for a number of them.
// For a client whose /open and /close are watched: it connects when the test calls reconnect()
// after watch(), since a connection made first would fire /open before anyone listened.
ClientOptions connect_later() {
  ClientOptions options;
  options.connect_now = false;
  return options;
}

struct Lifecycle {
  Latch opens, closes;
  void watch(Client& client) {
    client.on("/open", [this](std::string_view, ServerCallback) { opens.count_down(); });
    client.on("/close", [this](std::string_view, ServerCallback) { closes.count_down(); });
  }
};

// Subscribes and waits for the server's 200.
void subscribe(Client& client, const std::string& path, Collector& into) {
  Latch subscribed;
  std::atomic<bool> refused{true};
  client.on(
      path, [&into](std::string_view json, ServerCallback) { into.add(std::string(json)); },
      [&](const polybus::Status& status) {
        refused = static_cast<bool>(status);
        subscribed.count_down();
      });
  REQUIRE(subscribed.wait_for(1));
  REQUIRE_FALSE(refused.load());
}

}  // namespace

TEST_CASE("native client: an event reaches every subscriber of its path, over each transport") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  Client subscriber(url_for(scheme, *server));
  Client publisher(url_for(scheme, *server));
  Collector got;
  subscribe(subscriber, "/news", got);
  for (int i = 0; i < 5; ++i)
    REQUIRE_FALSE(publisher.send("/news/", "\"item " + std::to_string(i) + "\""));
  REQUIRE(got.wait_for_count(5));
  CHECK(got.order() == std::vector<std::string>{"\"item 0\"", "\"item 1\"", "\"item 2\"",
                                                "\"item 3\"", "\"item 4\""});
  if (scheme == "quickio+http") CHECK(server->http_sessions() == 2);
  if (scheme == "quickio+ws") CHECK(server->websocket_connections() == 2);
  if (scheme == "quickio") CHECK(server->raw_connections() == 2);
}

TEST_CASE("native client: HTTP long polling keeps its connections alive between requests") {
  auto server = Server::launch();
  Client subscriber(url_for("quickio+http", *server));
  Client publisher(url_for("quickio+http", *server));
  Collector got;
  subscribe(subscriber, "/kept", got);
  REQUIRE_FALSE(publisher.send("/kept", "0"));
  REQUIRE(got.wait_for_count(1));
  const auto accepted = server->metrics().connections_accepted;
  // Each event is a POST from the publisher and ends the subscriber's held poll, which another
  // replaces: two requests at least per event, on a connection each when none is kept.
  constexpr int kEvents = 30;
  for (int i = 1; i <= kEvents; ++i) {
    REQUIRE_FALSE(publisher.send("/kept", std::to_string(i)));
    REQUIRE(got.wait_for_count(static_cast<std::size_t>(i) + 1));
  }
  const auto opened = server->metrics().connections_accepted - accepted;
  CAPTURE(opened);
  CHECK(opened <= 4);  // a kept connection that did end (a race) costs one more, not one per event
  CHECK(server->http_sessions() == 2);
}

TEST_CASE("native client: a callback gets the answer of the client that served the request") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  Client responder(url_for(scheme, *server));
  Client requester(url_for(scheme, *server), connect_later());
  Lifecycle life;  // a callback needs a connection: it is never queued
  life.watch(requester);
  requester.reconnect();
  REQUIRE(life.opens.wait_for(1));
  Latch subscribed;
  // Checked on this thread: Catch's assertions are not for the client's io thread.
  std::atomic<bool> had_callback{false}, first_ok{false}, second_refused{false};
  responder.on(
      "/add",
      [&](std::string_view json, ServerCallback callback) {
        had_callback = static_cast<bool>(callback);
        first_ok = !callback.reply(200, "{\"sum\":" + std::string(json) + "}");
        second_refused =
            callback.reply(200, "1") == make_error_code(polybus::errc::already_responded);
      },
      [&](const polybus::Status&) { subscribed.count_down(); });
  REQUIRE(subscribed.wait_for(1));
  Latch answered;
  std::mutex mutex;
  polybus::Status status(polybus::errc::timeout);
  std::string data;
  requester.send("/add", "3", [&](const polybus::Status& s, std::string_view d, ServerCallback) {
    std::lock_guard<std::mutex> lock(mutex);
    status = s;
    data = d;
    answered.count_down();
  });
  REQUIRE(answered.wait_for(1));
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(status == std::error_code{});
  CHECK(data == R"({"sum":3})");
  CHECK(had_callback.load());
  CHECK(first_ok.load());
  CHECK(second_refused.load());
}

TEST_CASE("native client: quickio+ws falls back to HTTP long polling when the upgrade is refused") {
  ServerOptions options;
  options.refuse_websocket = true;
  auto server = Server::launch(options);
  Client client(url_for("quickio+ws", *server), connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  REQUIRE(life.opens.wait_for(1));
  CHECK(server->http_sessions() == 1);
  CHECK(server->websocket_connections() == 0);
  Collector got;
  subscribe(client, "/fallback", got);
  client.send("/fallback", "\"over http\"");
  REQUIRE(got.wait_for_count(1));
}

TEST_CASE("native client: quickio+ws with http_fallback=false retries WebSocket, never HTTP") {
  ServerOptions options;
  options.refuse_websocket = true;
  auto server = Server::launch(options);
  // Before the client: attempts go on reporting until it is destroyed.
  Collector errors;  // each failed attempt's /error, a JSON string naming the refusal
  Lifecycle life;
  Client client(url_for("quickio+ws", *server, "&http_fallback=false"), connect_later());
  life.watch(client);
  client.on("/error",
            [&](std::string_view json, ServerCallback) { errors.add(std::string(json)); });
  client.reconnect();
  // With the fallback, the second attempt would be HTTP and open (the case above).
  REQUIRE(errors.wait_for_count(3));
  CHECK(life.opens.count() == 0);
  CHECK(server->http_sessions() == 0);
  CHECK(server->websocket_connections() == 0);
  for (const auto& error : errors.order()) CHECK_THAT(error, Catch::Matchers::Contains("400"));
}

TEST_CASE("native client: pending callbacks fail with -1 disconnected when the server goes away") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  // The client asks itself and never answers: the callback stays pending at the server until
  // the connection goes (a responder of its own that went away would be answered 500 instead).
  Client asker(url_for(scheme, *server));
  Latch subscribed, heard;
  asker.on(
      "/never", [&](std::string_view, ServerCallback) { heard.count_down(); },
      [&](const polybus::Status&) { subscribed.count_down(); });
  REQUIRE(subscribed.wait_for(1));
  Latch failed;
  std::atomic<int> calls{0};
  polybus::Status why;  // read after the latch
  asker.send("/never", "null",
             [&](const polybus::Status& status, std::string_view, ServerCallback) {
               ++calls;
               why = status;
               failed.count_down();
             });
  REQUIRE(heard.wait_for(1));
  server->stop();
  REQUIRE(failed.wait_for(1));
  CHECK(why == polybus::errc::disconnected);
  CHECK_THAT(why.cause(), Catch::Contains("/never: disconnected"));
  Lifecycle life;
  life.watch(asker);
  server->start();
  REQUIRE(life.opens.wait_for(1));
  CHECK(calls.load() == 1);
}

TEST_CASE(
    "native client: events sent while disconnected are queued and flushed after the "
    "resubscription") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto server = Server::launch();
  Client client(url_for(scheme, *server), connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  Collector got;
  subscribe(client, "/mine", got);
  REQUIRE(life.opens.wait_for(1));
  server->stop();
  REQUIRE(life.closes.wait_for(1));
  REQUIRE_FALSE(client.connected());
  for (int i = 0; i < 3; ++i) REQUIRE_FALSE(client.send("/mine", std::to_string(i)));
  server->start();
  // The queue goes out after /qio/on on the new connection, so the client hears its own events.
  REQUIRE(got.wait_for_count(3));
  CHECK(got.order() == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("native client: a send over max_queued_bytes while disconnected fails at once") {
  auto server = Server::launch();
  const auto port = server->port();
  server.reset();  // nothing listens there now
  Client client("quickio://127.0.0.1:" + std::to_string(port) + kFast + "&max_queued_bytes=64");
  CHECK_FALSE(client.send("/q", "\"" + std::string(30, 'a') + "\""));
  CHECK(client.send("/q", "\"" + std::string(30, 'b') + "\"") ==
        make_error_code(client_errc::queue_full));
  CHECK(client.send("/q", "{not json") == make_error_code(polybus::errc::invalid_argument));
}

TEST_CASE("native client: /qio/move takes the client to the other server, and it stays there") {
  // Over HTTP, a long pause between polls makes the move likely to come while no poll is held.
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws", "quickio+http");
  CAPTURE(scheme);
  auto first = Server::launch();
  auto second = Server::launch();
  const std::string url =
      scheme == "quickio+http"
          ? scheme + "://" + first->address() +
                "?reconnect_initial=20ms&reconnect_max=200ms&http_poll_delay_max=300ms"
          : url_for(scheme, *first);
  Client client(url, connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  Collector got;
  subscribe(client, "/moved", got);
  first->move_all(second->address());
  REQUIRE(life.opens.wait_for(2));
  CHECK(second->connections() == 1);
  REQUIRE(eventually([&] { return second->subscribers("/moved") == 1; }));
  second->broadcast("/moved", "\"hello from the second\"");
  REQUIRE(got.wait_for_count(1));
  // Later reconnects follow the move too.
  second->stop();
  second->start();
  REQUIRE(life.opens.wait_for(3));
  CHECK(second->connections() == 1);
  CHECK(first->connections() == 0);
}

TEST_CASE(
    "native client: silence longer than heartbeat_timeout drops the connection and reconnects") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws");
  CAPTURE(scheme);
  auto server = Server::launch();
  Client client(url_for(scheme, *server, "&heartbeat_timeout=200ms"), connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  Collector errors;
  client.on("/error",
            [&](std::string_view json, ServerCallback) { errors.add(std::string(json)); });
  REQUIRE(life.opens.wait_for(1));
  server->set_silent(true);
  REQUIRE(life.closes.wait_for(1));
  REQUIRE(errors.wait_for_count(1));
  CHECK_THAT(errors.order().front(), Catch::Contains("heartbeat_timeout"));
  server->set_silent(false);
  REQUIRE(life.opens.wait_for(2));
}

TEST_CASE("native client: close fails pending callbacks with -1 closed and fires /close") {
  auto server = Server::launch();
  Client silent(url_for("quickio", *server));
  Latch subscribed, heard;
  silent.on(
      "/hold", [&](std::string_view, ServerCallback) { heard.count_down(); },
      [&](const polybus::Status&) { subscribed.count_down(); });
  REQUIRE(subscribed.wait_for(1));
  Client asker(url_for("quickio", *server), connect_later());
  Lifecycle life;
  life.watch(asker);
  asker.reconnect();
  REQUIRE(life.opens.wait_for(1));
  Latch done;
  polybus::Status why;
  asker.send("/hold", "null", [&](const polybus::Status& status, std::string_view, ServerCallback) {
    why = status;
    done.count_down();
  });
  REQUIRE(heard.wait_for(1));
  asker.close();
  REQUIRE(done.wait_for(1));
  REQUIRE(life.closes.wait_for(1));
  CHECK(why == polybus::errc::closed);
  CHECK(asker.send("/x", "null") == make_error_code(polybus::errc::closed));
}

TEST_CASE("native client: reconnect() drops the connection and subscribes again on the new one") {
  auto server = Server::launch();
  Client client(url_for("quickio", *server), connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  Collector got;
  subscribe(client, "/again", got);
  REQUIRE(life.opens.wait_for(1));
  client.reconnect();
  REQUIRE(life.closes.wait_for(1));
  REQUIRE(life.opens.wait_for(2));
  REQUIRE(eventually([&] { return server->subscribers("/again") == 1; }));
  server->broadcast("/again", "\"after\"");
  REQUIRE(got.wait_for_count(1));
}

TEST_CASE("native client: off removes one listener, and the path's subscription with the last") {
  auto server = Server::launch();
  Client client(url_for("quickio", *server));
  Collector first, second;
  subscribe(client, "/two", first);
  Latch added;
  auto id = client.on(
      "/two", [&](std::string_view json, ServerCallback) { second.add(std::string(json)); },
      [&](const polybus::Status&) { added.count_down(); });
  REQUIRE(added.wait_for(1));
  client.off("/two", id);
  server->broadcast("/two", "1");
  REQUIRE(first.wait_for_count(1));
  CHECK(second.total() == 0);
  client.off("/two");
  REQUIRE(eventually([&] { return server->subscribers("/two") == 0; }));
}

TEST_CASE("native client: heartbeat challenges are answered, so the server keeps the connection") {
  auto scheme = GENERATE(as<std::string>{}, "quickio", "quickio+ws");
  CAPTURE(scheme);
  ServerOptions options;
  options.challenge_after = std::chrono::milliseconds(50);
  options.challenge_timeout = std::chrono::milliseconds(500);
  auto server = Server::launch(options);
  Client client(url_for(scheme, *server), connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  Latch challenges;
  // /qio/... paths are local: listening to one sends no /qio/on.
  client.on("/qio/heartbeat", [&](std::string_view, ServerCallback callback) {
    if (callback) challenges.count_down();
  });
  REQUIRE(challenges.wait_for(3));  // an unanswered one would end the connection instead
  CHECK(life.closes.count() == 0);
  CHECK(life.opens.count() == 1);
}

namespace {

// One peer of the raw transport, blocking, on the test thread: the handshake, then frames of an
// 8-byte big-endian length and one event each.
struct RawPeer {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::ip::tcp::socket socket{io};
  std::string address() const {
    return "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  }
  void accept() {
    acceptor.accept(socket);
    std::string hello(9, '\0');
    asio::read(socket, asio::buffer(hello));
    REQUIRE(hello == "/qio/ohai");
    asio::write(socket, asio::buffer(hello));
  }
  std::string read_event() {
    unsigned char size[8];
    asio::read(socket, asio::buffer(size));
    std::uint64_t n = 0;
    for (unsigned char byte : size) n = (n << 8) | byte;
    REQUIRE(n < 1 << 20);
    std::string event(n, '\0');
    asio::read(socket, asio::buffer(event));
    return event;
  }
  // The next event whose text starts with `prefix` (heartbeats and the like pass by).
  std::string read_event_starting(const std::string& prefix) {
    for (int i = 0; i < 100; ++i) {
      std::string event = read_event();
      if (event.rfind(prefix, 0) == 0) return event;
    }
    FAIL("no event starting " << prefix);
    return {};
  }
  void write_event(const std::string& event) {
    std::string frame(8, '\0');
    for (int i = 0; i < 8; ++i) frame[7 - i] = static_cast<char>((event.size() >> (8 * i)) & 0xff);
    asio::write(socket, asio::buffer(frame + event));
  }
};

}  // namespace

TEST_CASE("native client: an answer that asks for a callback in turn gets a handle to answer it") {
  // QuickIO's callback chains: the server answers /chain and, in that answer, asks the client
  // for a callback of its own (/qio/callback/<client id>:<server id>=...).
  RawPeer server;
  Client client("quickio://" + server.address() + kFast, connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  server.accept();
  REQUIRE(life.opens.wait_for(1));  // a callback sent before it would fail as disconnected
  Latch answered;
  polybus::Status status(polybus::errc::timeout);
  std::string data;
  std::error_code replied = make_error_code(polybus::errc::timeout);
  bool had_next = false;
  client.send("/chain", "null",
              [&](const polybus::Status& s, std::string_view d, ServerCallback next) {
                status = s;
                data = d;
                had_next = static_cast<bool>(next);
                replied = next.reply(200, "\"yes\"");
                answered.count_down();
              });
  const std::string sent = server.read_event_starting("/chain:");
  const std::string id = sent.substr(7, sent.find('=') - 7);
  server.write_event("/qio/callback/" + id + ":77={\"code\":200,\"data\":\"more?\"}");
  REQUIRE(answered.wait_for(1));
  CHECK(status == std::error_code{});
  CHECK(data == "\"more?\"");
  CHECK(had_next);
  CHECK(replied == std::error_code{});
  const std::string answer = server.read_event_starting("/qio/callback/77:");
  CHECK_THAT(answer, Catch::Contains("\"yes\""));
  client.close();
}

TEST_CASE("native client: a refused callback keeps the server's code and words in its Status") {
  RawPeer server;
  Client client("quickio://" + server.address() + kFast, connect_later());
  Lifecycle life;
  life.watch(client);
  client.reconnect();
  server.accept();
  REQUIRE(life.opens.wait_for(1));  // a callback sent before it would fail as disconnected
  Latch answered;
  polybus::Status status;
  client.send("/missing", "null",
              [&](const polybus::Status& s, std::string_view, ServerCallback next) {
                status = s;
                CHECK_FALSE(next);
                answered.count_down();
              });
  const std::string sent = server.read_event_starting("/missing:");
  const std::string id = sent.substr(9, sent.find('=') - 9);
  server.write_event("/qio/callback/" + id +
                     ":0={\"code\":404,\"data\":null,\"err_msg\":\"no such event\"}");
  REQUIRE(answered.wait_for(1));
  CHECK(status == polybus::errc::no_responder);
  CHECK(status.code().category() == answer_category());
  CHECK(status.code().value() == 404);
  CHECK_THAT(status.cause(), Catch::Contains("/missing: answered 404: no such event"));
  client.close();
}
