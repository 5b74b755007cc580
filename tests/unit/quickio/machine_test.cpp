// SPDX-License-Identifier: Apache-2.0
// The sans-IO session, driven event by event: no socket, no thread, no clock.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "machine.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "raw_wire.hpp"

namespace {

using namespace polybus::quickio;
using polybus::quickio::detail::Incoming;
using polybus::quickio::detail::Machine;

struct Hooks : detail::MachineHandler {
  std::vector<std::pair<std::string, detail::SentFn>> sent;  // what the machine sent, in order
  std::vector<detail::ExpiredFn> expired;                    // with each, its sender's check
  void send(std::string_view text, detail::SentFn done, detail::ExpiredFn gone) override {
    sent.emplace_back(std::string(text), std::move(done));
    expired.push_back(std::move(gone));
  }
  std::vector<std::string> moves;
  std::vector<std::string> refused;
  std::size_t unsent = 0;  // what the "connection" has not written yet
  std::size_t unsent_bytes() const override { return unsent; }
  bool room = true;  // the "connection" takes more now
  bool write_room() override { return room; }
  void move_to(const std::string& address) override { moves.push_back(address); }
  void subscription_refused(const std::string& path, int code, const std::string& err) override {
    refused.push_back(path + " " + std::to_string(code) + " " + err);
  }
};

// What the machine sent since the last call, each reported written.
std::vector<std::string> drain(Hooks& hooks) {
  auto sent = std::move(hooks.sent);
  hooks.sent.clear();
  hooks.expired.clear();
  std::vector<std::string> texts;
  for (auto& [text, done] : sent) {
    texts.push_back(text);
    if (done) done({});
  }
  return texts;
}

std::error_code feed(Machine& session, std::string_view text) {
  static const std::shared_ptr<const void> none;
  return session.receive(text, none);
}

struct Heard {
  int code;
  std::string data;
  std::string err;
};

}  // namespace

TEST_CASE("callback ids start at 1 on every connection") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  session.send("/a", "null", [](const detail::Answer&) {});
  session.send("/b", "1", [](const detail::Answer&) {});
  CHECK(drain(hooks) == std::vector<std::string>{"/a:1=null", "/b:2=1"});
  session.closed();
  session.opened();
  session.send("/c", "null", [](const detail::Answer&) {});
  CHECK(drain(hooks) == std::vector<std::string>{"/c:1=null"});
  CHECK(session.connection() == 2);
}

TEST_CASE("a callback gets the server's answer once, with code, data and err_msg") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::vector<Heard> answers;
  session.send("/ask", "null", [&](const detail::Answer& got) {
    const int code = got.code;
    const std::string_view data = got.data_json, err = got.err_msg;
    answers.push_back({code, std::string(data), std::string(err)});
  });
  drain(hooks);
  REQUIRE_FALSE(
      feed(session, R"(/qio/callback/1:0={"code":404,"data":null,"err_msg":"no such event"})"));
  REQUIRE_FALSE(feed(session, R"(/qio/callback/1:0={"code":200,"data":1})"));  // unknown by now
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == 404);
  CHECK(answers[0].data == "null");
  CHECK(answers[0].err == "no such event");
}

TEST_CASE("pending callbacks fail once with -1 disconnected when the connection drops") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::vector<Heard> answers;
  for (int i = 0; i < 3; ++i)
    session.send("/x", "null", [&](const detail::Answer& got) {
      const int code = got.code;
      const std::string_view data = got.data_json, err = got.err_msg;
      answers.push_back({code, std::string(data), std::string(err)});
    });
  drain(hooks);
  session.closed();
  REQUIRE(answers.size() == 3);
  for (const auto& a : answers) CHECK((a.code == -1 && a.err == "disconnected"));
  session.opened();
  REQUIRE_FALSE(feed(session, R"(/qio/callback/1:0={"code":200,"data":null})"));
  CHECK(answers.size() == 3);
  CHECK(session.pending_callbacks() == 0);
}

TEST_CASE("a callback sent while disconnected fails at once with -1 and is never queued") {
  Hooks hooks;
  Machine session({}, hooks);
  std::vector<Heard> answers;
  session.send("/x", "null", [&](const detail::Answer& got) {
    const int code = got.code;
    const std::string_view err = got.err_msg;
    answers.push_back({code, "", std::string(err)});
  });
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == -1);
  CHECK(session.queued_bytes() == 0);
  session.opened();
  CHECK(drain(hooks).empty());
}

TEST_CASE("on reconnect: subscriptions, then the queue, then /open, in that order") {
  Hooks hooks;
  Machine session({}, hooks);
  std::vector<std::string> order;
  session.on("/open", [&](const Incoming&) { order.push_back("/open"); });
  session.on("/news/", [](const Incoming&) {});  // cleaned to /news
  session.on("/sport", [](const Incoming&) {});
  session.on("/sport", [](const Incoming&) {});  // a second listener: still one /qio/on
  REQUIRE_FALSE(session.send("queued//path", R"({"n":1})"));
  REQUIRE_FALSE(session.send("/queued", "2"));
  CHECK(hooks.sent.empty());  // nothing while disconnected
  session.opened();
  auto texts = drain(hooks);
  CHECK(texts == std::vector<std::string>{R"(/qio/on:1="/news")", R"(/qio/on:2="/sport")",
                                          R"(/queued/path:0={"n":1})", "/queued:0=2"});
  CHECK(order == std::vector<std::string>{"/open"});
}

TEST_CASE("events queued while disconnected are bounded by max_queued_bytes") {
  Hooks hooks;
  Machine session({32}, hooks);
  CHECK_FALSE(session.send("/a", "\"0123456789\""));  // 17 bytes
  CHECK(session.send("/b", "\"0123456789\"") == make_error_code(client_errc::queue_full));
  CHECK(session.queued_bytes() == 17);
}

TEST_CASE("while connected, events the connection has not written yet are bounded too") {
  Hooks hooks;
  Machine session({32}, hooks);
  session.opened();
  drain(hooks);
  hooks.unsent = 15;
  CHECK_FALSE(session.send("/a", "\"0123456789\""));  // 15 + 17 fits in 32
  CHECK(drain(hooks).size() == 1);
  hooks.unsent = 16;
  CHECK(session.send("/a", "\"0123456789\"") == make_error_code(client_errc::queue_full));
  CHECK(drain(hooks).empty());
  hooks.unsent = 0;  // the connection caught up
  CHECK_FALSE(session.send("/a", "\"0123456789\""));
}

TEST_CASE("requests the connection has not written yet are bounded like events, and answered") {
  Hooks hooks;
  Machine session({32}, hooks);
  session.opened();
  drain(hooks);
  std::vector<int> answered;
  const auto on_answer = [&](const detail::Answer& got) {
    const int code = got.code;
    answered.push_back(code);
  };
  hooks.unsent = 15;
  CHECK_FALSE(session.send("/a", "\"012345678\"", on_answer));  // 15 + 16 fits in 32
  CHECK(drain(hooks) == std::vector<std::string>{R"(/a:1="012345678")"});
  hooks.unsent = 17;
  CHECK(session.send("/a", "\"012345678\"", on_answer) == make_error_code(client_errc::queue_full));
  CHECK(session.refused_at() == 33);
  CHECK(drain(hooks).empty());
  // The refused one kept no callback and used no id: the next is 2, and only 1 is answered.
  hooks.unsent = 0;
  CHECK_FALSE(session.send("/a", "\"012345678\"", on_answer));
  CHECK(drain(hooks) == std::vector<std::string>{R"(/a:2="012345678")"});
  CHECK_FALSE(feed(session, R"(/qio/callback/1:0={"code":200,"data":null})"));
  CHECK(answered == std::vector<int>{200});
}

TEST_CASE("while the connection has no room, events wait in order within max_queued_bytes") {
  Hooks hooks;
  Machine session({40}, hooks);
  session.opened();
  drain(hooks);
  hooks.room = false;
  CHECK_FALSE(session.send("/a", "\"0123456789\""));  // 17 bytes, queued
  CHECK_FALSE(session.send("/b", "\"0123456789\""));  // 34
  CHECK(session.send("/c", "\"0123456789\"") == make_error_code(client_errc::queue_full));
  CHECK(session.refused_at() == 51);
  CHECK(drain(hooks).empty());
  CHECK(session.queued_bytes() == 34);
  hooks.room = true;  // the connection drained: its owner flushes
  session.flush_queue();
  CHECK(drain(hooks) == std::vector<std::string>{R"(/a:0="0123456789")", R"(/b:0="0123456789")"});
  CHECK(session.queued_bytes() == 0);
  // Room again: sent at once.
  CHECK_FALSE(session.send("/d", "\"0123456789\""));
  CHECK(drain(hooks).size() == 1);
}

TEST_CASE("a queued event whose sender gave up is dropped, not sent later") {
  Hooks hooks;
  Machine session({}, hooks);
  std::vector<std::error_code> outcomes;
  session.send(
      "/late", "1", {}, [&](std::error_code ec) { outcomes.push_back(ec); }, [] { return true; });
  session.send("/kept", "2", {}, [&](std::error_code ec) { outcomes.push_back(ec); });
  session.opened();
  CHECK(drain(hooks) == std::vector<std::string>{"/kept:0=2"});
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0] == make_error_code(polybus::errc::timeout));
  CHECK_FALSE(outcomes[1]);
}

TEST_CASE(
    "events a link gives back unsent go first on the next connection, but for those "
    "that asked for a callback or whose sender gave up") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  drain(hooks);
  std::vector<std::string> outcomes;
  const auto note = [&](std::string name) {
    return [&outcomes, name](std::error_code ec) {
      outcomes.push_back(name + (ec ? " " + ec.message() : ""));
    };
  };
  bool late_gone = false;
  REQUIRE_FALSE(session.send("/a", "1", {}, note("a")));
  REQUIRE_FALSE(session.send("/late", "2", {}, note("late"), [&] { return late_gone; }));
  REQUIRE_FALSE(session.send("/b", "3", {}, note("b")));
  // The link took them and never wrote them: what it gives back is what the machine sent.
  REQUIRE(hooks.sent.size() == 3);
  CHECK(hooks.expired[1]);  // the sender's check travels with the event
  std::vector<Machine::Queued> unsent;
  for (std::size_t i = 0; i < hooks.sent.size(); ++i)
    unsent.push_back(
        {hooks.sent[i].first, std::move(hooks.sent[i].second), std::move(hooks.expired[i])});
  unsent.push_back({"/ask:7=null", note("ask"), {}});  // a callback's: never sent again
  hooks.sent.clear();
  hooks.expired.clear();
  session.closed();
  REQUIRE_FALSE(session.send("/c", "4", {}, note("c")));  // sent while disconnected: after them
  session.requeue(std::move(unsent));
  CHECK(outcomes ==
        std::vector<std::string>{"ask " + make_error_code(polybus::errc::disconnected).message()});
  CHECK(session.queued_bytes() == std::string("/a:0=1/late:0=2/b:0=3/c:0=4").size());
  late_gone = true;  // its deadline passed before the next connection
  session.opened();
  CHECK(drain(hooks) == std::vector<std::string>{"/a:0=1", "/b:0=3", "/c:0=4"});
  CHECK(outcomes.size() == 5);
  CHECK(outcomes[1] == "late " + make_error_code(polybus::errc::timeout).message());

  // While open (a new link already took over), nothing is queued: each fails as before.
  std::vector<Machine::Queued> again;
  again.push_back({"/d:0=5", note("d"), {}});
  session.requeue(std::move(again));
  CHECK(outcomes.back() == "d " + make_error_code(polybus::errc::disconnected).message());
  CHECK(hooks.sent.empty());
}

TEST_CASE("a heartbeat challenge with a callback id is answered 200 null") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  REQUIRE_FALSE(feed(session, "/qio/heartbeat:0=null"));
  CHECK(drain(hooks).empty());
  REQUIRE_FALSE(feed(session, "/qio/heartbeat:65538=null"));
  CHECK(drain(hooks) ==
        std::vector<std::string>{R"(/qio/callback/65538:0={"code":200,"data":null})"});
}

TEST_CASE("/qio/move hands the address to the owner") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  REQUIRE_FALSE(feed(session, R"(/qio/move:0="127.0.0.1:9999")"));
  CHECK(hooks.moves == std::vector<std::string>{"127.0.0.1:9999"});
  std::string why;
  static const std::shared_ptr<const void> none;
  CHECK(session.receive("/qio/move:0=12", none, &why));
  CHECK_THAT(why, Catch::Contains("/qio/move"));
}

TEST_CASE("a refused subscription drops its listeners and is reported") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::vector<int> results;
  session.on(
      "/secret", [](const Incoming&) {}, false,
      [&](int code, std::string_view) { results.push_back(code); });
  drain(hooks);
  REQUIRE_FALSE(
      feed(session, R"(/qio/callback/1:0={"code":401,"data":null,"err_msg":"not subscribable"})"));
  CHECK(results == std::vector<int>{401});
  CHECK(hooks.refused == std::vector<std::string>{"/secret 401 not subscribable"});
  CHECK_FALSE(session.has_listeners("/secret"));
  session.closed();
  session.opened();
  CHECK(drain(hooks).empty());  // not subscribed again
}

TEST_CASE("off sends /qio/off only when the path's last listener goes") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  auto first = session.on("/p", [](const Incoming&) {});
  auto second = session.on("/p", [](const Incoming&) {});
  drain(hooks);
  session.off("/p", first);
  CHECK(drain(hooks).empty());
  session.off("/p", second);
  CHECK(drain(hooks) == std::vector<std::string>{R"(/qio/off:0="/p")"});
}

TEST_CASE("a one-shot listener hears one event, then the path is unsubscribed") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  int heard = 0;
  session.on(
      "/once", [&](const Incoming&) { ++heard; }, true);
  drain(hooks);
  REQUIRE_FALSE(feed(session, "/once:0=1"));
  REQUIRE_FALSE(feed(session, "/once:0=2"));
  CHECK(heard == 1);
  CHECK(drain(hooks) == std::vector<std::string>{R"(/qio/off:0="/once")"});
}

TEST_CASE("listeners that remove themselves or others while they run hear each event whole") {
  // The lone listener of a path runs without a list of its own; it still outlives its off().
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::string alone_heard;
  auto big = std::make_shared<std::string>(200, 'k');  // a capture std::function cannot hold inline
  session.on("/alone", [&session, &alone_heard, big](const Incoming& e) {
    session.off("/alone");  // destroys this listener's entry while it runs
    alone_heard += std::string(e.json) + *big;
  });
  drain(hooks);
  REQUIRE_FALSE(feed(session, "/alone:0=1"));
  REQUIRE_FALSE(feed(session, "/alone:0=2"));
  CHECK(alone_heard == "1" + std::string(200, 'k'));
  CHECK(drain(hooks) == std::vector<std::string>{R"(/qio/off:0="/alone")"});

  // Two listeners: the first removes the second; both hear the event that was under way.
  int first_heard = 0, second_heard = 0;
  std::uint64_t second = 0;
  session.on("/pair", [&](const Incoming&) {
    ++first_heard;
    session.off("/pair", second);
  });
  second = session.on("/pair", [&](const Incoming&) { ++second_heard; });
  drain(hooks);
  REQUIRE_FALSE(feed(session, "/pair:0=1"));
  REQUIRE_FALSE(feed(session, "/pair:0=2"));
  CHECK(first_heard == 2);
  CHECK(second_heard == 1);
}

TEST_CASE("a server callback can be answered only on the connection it came on") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::uint64_t connection = 0, callback = 0;
  session.on("/job", [&](const Incoming& e) {
    connection = e.connection;
    callback = e.server_callback;
  });
  drain(hooks);
  REQUIRE_FALSE(feed(session, "/job:7=\"work\""));
  REQUIRE(callback == 7);
  session.closed();
  session.opened();
  drain(hooks);
  CHECK(session.answer(connection, callback, 200, "null") ==
        make_error_code(polybus::errc::disconnected));
  CHECK(session.answer(session.connection(), callback, 200, "\"done\"") == std::error_code{});
  CHECK(drain(hooks) ==
        std::vector<std::string>{R"(/qio/callback/7:0={"code":200,"data":"done"})"});
}

TEST_CASE("malformed events from the server are errors that name the problem") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::string why;
  static const std::shared_ptr<const void> none;
  CHECK(session.receive("no-slash:0=null", none, &why));
  CHECK_FALSE(why.empty());
  why.clear();
  session.send("/q", "null", [](const detail::Answer&) {});
  drain(hooks);
  CHECK(session.receive("/qio/callback/1:0={\"nocode\":1}", none, &why));
  CHECK_FALSE(why.empty());
}

TEST_CASE("shutting down fails callbacks with -1 closed, drops the queue, fires /close once") {
  Hooks hooks;
  Machine session({}, hooks);
  int closes = 0;
  session.on("/close", [&](const Incoming&) { ++closes; });
  session.opened();
  std::vector<Heard> answers;
  session.send("/x", "null", [&](const detail::Answer& got) {
    const int code = got.code;
    const std::string_view err = got.err_msg;
    answers.push_back({code, "", std::string(err)});
  });
  drain(hooks);
  session.shut_down();
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == -1);
  CHECK(answers[0].err == "closed");
  CHECK(closes == 1);
}

TEST_CASE("invalid JSON data is refused before anything is sent or queued") {
  Hooks hooks;
  Machine session({}, hooks);
  CHECK(session.send("/x", "{nope") == make_error_code(polybus::errc::invalid_argument));
  CHECK(session.queued_bytes() == 0);
}

TEST_CASE("server bytes through the raw wire, one at a time, give what they give whole") {
  // The machine under its wire, as the connection drives it, with no socket: the handshake, a
  // callback's answer, an event for a listener and a heartbeat challenge.
  struct Pipe : detail::WireHandler {
    Machine* machine = nullptr;
    std::error_code error;
    void on_wire_open() override { machine->opened(); }
    void on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) override {
      if (!error) error = machine->receive(text, owner);
    }
  };
  auto run = [](bool byte_by_byte) {
    Hooks hooks;
    Machine session({}, hooks);
    Pipe pipe;
    pipe.machine = &session;
    detail::RawWire wire(1 << 20, pipe);
    std::vector<std::string> heard;
    std::vector<std::string> answers;
    session.on("/news", [&](const Incoming& e) { heard.emplace_back(e.json); });
    wire.start();
    std::string input(kHandshake);
    append_raw_frame(input, R"(/qio/callback/1:0={"code":200,"data":"ok"})");  // /qio/on's answer
    append_raw_frame(input, R"(/news:0={"headline":"split anywhere"})");
    append_raw_frame(input, "/qio/heartbeat:7=null");
    auto owner = std::make_shared<std::string>(input);
    std::string why;
    if (byte_by_byte) {
      for (char c : input) REQUIRE_FALSE(wire.receive(owner, std::string_view(&c, 1), why));
    } else {
      REQUIRE_FALSE(wire.receive(owner, *owner, why));
    }
    REQUIRE_FALSE(pipe.error);
    CHECK(session.is_open());
    return std::make_pair(heard, drain(hooks));
  };
  auto whole = run(false);
  CHECK(whole.first == std::vector<std::string>{R"({"headline":"split anywhere"})"});
  // What the machine sent on opening, and its answer to the heartbeat challenge.
  CHECK(whole.second == std::vector<std::string>{R"(/qio/on:1="/news")",
                                                 R"(/qio/callback/7:0={"code":200,"data":null})"});
  CHECK(run(true) == whole);
}

TEST_CASE("a late answer to a /qio/on from before an off() is not the new subscription's") {
  // Epochs count for every path, so a path subscribed, removed and subscribed again does not
  // start over at the epoch of the /qio/on whose answer may still be on its way.
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::vector<int> first_results, second_results;
  session.on(
      "/p", [](const Incoming&) {}, false,
      [&](int code, std::string_view) { first_results.push_back(code); });
  session.off("/p");
  session.on(
      "/p", [](const Incoming&) {}, false,
      [&](int code, std::string_view) { second_results.push_back(code); });
  CHECK(drain(hooks) ==
        std::vector<std::string>{"/qio/on:1=\"/p\"", "/qio/off:0=\"/p\"", "/qio/on:2=\"/p\""});
  // The first /qio/on's answer, late: it was for a subscription that is gone.
  REQUIRE_FALSE(feed(session, R"(/qio/callback/1:0={"code":200,"data":null})"));
  CHECK(second_results.empty());
  REQUIRE_FALSE(feed(session, R"(/qio/callback/2:0={"code":401,"data":null,"err_msg":"not now"})"));
  CHECK(second_results == std::vector<int>{401});
  CHECK_FALSE(session.has_listeners("/p"));
}

TEST_CASE("an answer that asks for a callback in turn says so and names its connection") {
  Hooks hooks;
  Machine session({}, hooks);
  session.opened();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> asked;  // server callback, connection
  session.send("/chain", "null", [&](const detail::Answer& got) {
    asked.emplace_back(got.server_callback, got.connection);
  });
  drain(hooks);
  REQUIRE_FALSE(feed(session, R"(/qio/callback/1:77={"code":200,"data":"more?"})"));
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == 77);
  CHECK(asked[0].second == session.connection());
  // Answered on the same connection: the machine writes it as the server asked.
  CHECK_FALSE(session.answer(session.connection(), 77, 200, "\"yes\"", ""));
  const auto sent = drain(hooks);
  REQUIRE(sent.size() == 1);
  CHECK_THAT(sent[0], Catch::StartsWith("/qio/callback/77:0="));
  CHECK_THAT(sent[0], Catch::Contains("\"yes\""));
}
