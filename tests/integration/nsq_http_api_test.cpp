// SPDX-License-Identifier: Apache-2.0
// The in-process nsqd's HTTP API, TLS policies and nsqlookupd TCP registration, as nsqd and
// nsqlookupd 1.3 answer them; tests/integration/nsq_dropin_differential_test.cpp compares the
// same answers with the real servers'.
#include <rapidjson/document.h>

#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include "http_exchange.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"
#include "tls_certs.hpp"
#include "wire_bytes.hpp"

using namespace polybus;
using namespace polybus::test;
using nsq::testing::Lookupd;
using nsq::testing::LookupdOptions;
using nsq::testing::Nsqd;
using nsq::testing::NsqdOptions;

namespace {

const std::string kFast = "reconnect_initial=5ms&reconnect_max=50ms";

std::unique_ptr<Nsqd> nsqd_with_http(NsqdOptions options = {}) {
  options.http_port = 0;
  return Nsqd::start(std::move(options));
}

rapidjson::Document parse(const std::string& json) {
  rapidjson::Document document;
  document.Parse(json.c_str());
  REQUIRE_FALSE(document.HasParseError());
  return document;
}

// How many producers nsqlookupd lists for a topic; -1 while it does not know the topic, which it
// answers with a 404 whose body has no "producers" (indexing that member would abort).
int listed_producers(const std::string& lookup_http, const std::string& topic) {
  const rapidjson::Document document =
      parse(http_exchange(lookup_http, "GET", "/lookup?topic=" + topic).body);
  if (!document.IsObject() || !document.HasMember("producers")) return -1;
  return static_cast<int>(document["producers"].Size());
}

}  // namespace

TEST_CASE("nsqd HTTP: /pub, /mpub and /pub?defer publish what a subscriber then receives",
          "[nsq][http]") {
  auto nsqd = nsqd_with_http();
  const std::string http = nsqd->http_address();
  REQUIRE(http_exchange(http, "POST", "/topic/create?topic=orders").status == 200);
  REQUIRE(http_exchange(http, "POST", "/channel/create?topic=orders&channel=billing").status ==
          200);

  const HttpAnswer pub = http_exchange(http, "POST", "/pub?topic=orders", "one");
  CHECK(pub.status == 200);
  CHECK(pub.body == "OK");
  CHECK(pub.header("x-nsq-content-type") == "nsq; version=1.0");
  CHECK(http_exchange(http, "POST", "/mpub?topic=orders", "two\nthree\n\nfour").body == "OK");
  const std::string binary = be32(2) + be32(4) + "five" + be32(3) + "six";
  CHECK(http_exchange(http, "POST", "/mpub?topic=orders&binary=true", binary).body == "OK");
  CHECK(http_exchange(http, "POST", "/pub?topic=orders&defer=50", "seven").body == "OK");
  CHECK(nsqd->topic_message_count("orders") == 7);

  Collector got;
  auto client = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  SubscribeOptions options;
  options.group = "billing";
  auto sub =
      client.subscribe("orders", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.size() == 7; }));
  for (const char* body : {"one", "two", "three", "four", "five", "six", "seven"}) {
    CHECK(got.count(body) == 1);
  }
}

TEST_CASE("nsqd HTTP: bad requests get nsqd's status and error text", "[nsq][http]") {
  NsqdOptions options;
  options.max_msg_size = 16;
  options.max_body_size = 64;
  auto nsqd = nsqd_with_http(options);
  const std::string http = nsqd->http_address();
  REQUIRE(http_exchange(http, "POST", "/topic/create?topic=t").status == 200);
  struct Case {
    const char* method;
    const char* target;
    std::string body;
    int status;
    const char* answer;
  };
  const std::vector<Case> cases = {
      {"POST", "/pub?topic=t", "", 400, R"({"message":"MSG_EMPTY"})"},
      {"POST", "/pub", "x", 400, R"({"message":"MISSING_ARG_TOPIC"})"},
      {"POST", "/pub?topic=bad!", "x", 400, R"({"message":"INVALID_TOPIC"})"},
      {"POST", "/pub?topic=t&defer=-1", "x", 400, R"({"message":"INVALID_DEFER"})"},
      {"POST", "/pub?topic=t&defer=abc", "x", 400, R"({"message":"INVALID_DEFER"})"},
      {"POST", "/pub?topic=t%zz", "x", 400, R"({"message":"INVALID_REQUEST"})"},
      {"POST", "/pub?topic=t", std::string(17, 'x'), 413, R"({"message":"MSG_TOO_BIG"})"},
      {"POST", "/mpub?topic=t", std::string(65, 'x'), 413, R"({"message":"BODY_TOO_BIG"})"},
      {"POST", "/mpub?topic=t", std::string(17, 'x') + "\nok", 413, R"({"message":"MSG_TOO_BIG"})"},
      {"POST", "/mpub?topic=t&binary=1", "ab", 413, R"({"message":"BAD_BODY"})"},
      {"POST", "/mpub?topic=t&binary=1", be32(0), 413, R"({"message":"BAD_BODY"})"},
      {"POST", "/mpub?topic=t&binary=1", be32(1) + be32(9) + "short", 413,
       R"({"message":"BAD_MESSAGE"})"},
      {"GET", "/pub?topic=t", "", 405, R"({"message":"METHOD_NOT_ALLOWED"})"},
      {"GET", "/nothing", "", 404, R"({"message":"NOT_FOUND"})"},
      {"POST", "/topic/delete?topic=nope", "", 404, R"({"message":"TOPIC_NOT_FOUND"})"},
      {"POST", "/topic/empty?topic=bad!", "", 400, R"({"message":"INVALID_TOPIC"})"},
      {"POST", "/topic/pause", "", 400, R"({"message":"MISSING_ARG_TOPIC"})"},
      {"POST", "/channel/create?topic=t", "", 400, R"({"message":"MISSING_ARG_CHANNEL"})"},
      {"POST", "/channel/create?topic=bad!&channel=c", "", 400,
       R"({"message":"INVALID_ARG_TOPIC"})"},
      {"POST", "/channel/create?topic=t&channel=bad!", "", 400,
       R"({"message":"INVALID_ARG_CHANNEL"})"},
      {"POST", "/channel/create?topic=nope&channel=c", "", 404, R"({"message":"TOPIC_NOT_FOUND"})"},
      {"POST", "/channel/empty?topic=t&channel=nope", "", 404,
       R"({"message":"CHANNEL_NOT_FOUND"})"},
      {"GET", "/config/bogus", "", 400, R"({"message":"INVALID_OPTION"})"},
      {"PUT", "/config/nsqlookupd_tcp_addresses", "not json", 400,
       R"({"message":"INVALID_VALUE"})"},
      {"PUT", "/config/max_msg_size", "5", 400, R"({"message":"INVALID_OPTION"})"},
  };
  for (const Case& c : cases) {
    INFO(c.method << " " << c.target);
    const HttpAnswer answer = http_exchange(http, c.method, c.target, c.body);
    CHECK(answer.status == c.status);
    CHECK(answer.body == c.answer);
    CHECK(answer.header("content-type") == "application/json; charset=utf-8");
  }
  CHECK(http_exchange(http, "GET", "/pub?topic=t").header("allow") == "OPTIONS, POST");
  CHECK(http_exchange(http, "GET", "/ping").body == "OK");
  CHECK_FALSE(http_exchange(http, "GET", "/ping").has("x-nsq-content-type"));
  CHECK(nsqd->topic_message_count("t") == 0);  // nothing refused was published
}

TEST_CASE("nsqd HTTP: /stats shows nsqd's schema, its clients and its producers", "[nsq][http]") {
  auto nsqd = nsqd_with_http();
  const std::string http = nsqd->http_address();
  auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  REQUIRE(producer.publish_sync("stats", "a") == std::error_code{});
  REQUIRE(producer.publish_sync("stats", "bb") == std::error_code{});
  auto consumer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  SubscribeOptions options;
  options.group = "watch";
  Collector got;
  auto sub =
      consumer.subscribe("stats", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.size() == 2; }));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("stats", "watch") == 0; }));

  const HttpAnswer answer = http_exchange(http, "GET", "/stats?format=json");
  REQUIRE(answer.status == 200);
  const rapidjson::Document stats = parse(answer.body);
  CHECK(std::string(stats["version"].GetString()) == "1.3.0");
  CHECK(std::string(stats["health"].GetString()) == "OK");
  const auto& topic = stats["topics"][0];
  CHECK(std::string(topic["topic_name"].GetString()) == "stats");
  CHECK(topic["message_count"].GetUint64() == 2);
  CHECK(topic["message_bytes"].GetUint64() == 3);
  CHECK(topic["paused"].IsFalse());
  const auto& channel = topic["channels"][0];
  CHECK(std::string(channel["channel_name"].GetString()) == "watch");
  CHECK(channel["message_count"].GetUint64() == 2);
  CHECK(channel["client_count"].GetInt() == 1);
  const auto& client = channel["clients"][0];
  CHECK(client["state"].GetInt() == 3);
  CHECK(client["finish_count"].GetUint64() == 2);
  CHECK(client["message_count"].GetUint64() == 2);
  CHECK(std::string(client["version"].GetString()) == "V2");
  const auto& publisher = stats["producers"][0];
  CHECK(std::string(publisher["pub_counts"][0]["topic"].GetString()) == "stats");
  CHECK(publisher["pub_counts"][0]["count"].GetUint64() == 2);

  // The fields in nsqd's order, as tools that read the text compare them.
  std::vector<std::string> names;
  for (const auto& member : channel.GetObject()) names.emplace_back(member.name.GetString());
  CHECK(names == std::vector<std::string>{"channel_name", "depth", "backend_depth",
                                          "in_flight_count", "deferred_count", "message_count",
                                          "requeue_count", "timeout_count", "client_count",
                                          "clients", "paused", "e2e_processing_latency"});

  // include_clients=false leaves clients and producers out; an unknown topic has no topics.
  const rapidjson::Document bare = parse(
      http_exchange(http, "GET", "/stats?format=json&include_clients=false&include_mem=0").body);
  CHECK(bare["topics"][0]["channels"][0]["clients"].IsNull());
  CHECK(bare["producers"].IsNull());
  CHECK_FALSE(bare.HasMember("memory"));
  CHECK(parse(http_exchange(http, "GET", "/stats?format=json&topic=nope").body)["topics"].IsNull());
  const std::string text = http_exchange(http, "GET", "/stats").body;
  CHECK(text.find("[stats          ] depth: 0     be-depth: 0     msgs: 2") != std::string::npos);
  CHECK(text.find("[watch                    ] depth: 0") != std::string::npos);
}

TEST_CASE("nsqd HTTP: pause holds messages, empty drops them, delete closes the channel's clients",
          "[nsq][http]") {
  auto nsqd = nsqd_with_http();
  const std::string http = nsqd->http_address();
  auto consumer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  SubscribeOptions options;
  options.group = "c";
  Collector got;
  auto sub =
      consumer.subscribe("p", options, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});

  // A paused channel delivers nothing; unpaused, it delivers what it held.
  REQUIRE(http_exchange(http, "POST", "/channel/pause?topic=p&channel=c").status == 200);
  REQUIRE(http_exchange(http, "POST", "/pub?topic=p", "held").body == "OK");
  REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("p", "c") == 1; }));
  CHECK(got.total() == 0);
  REQUIRE(http_exchange(http, "POST", "/channel/unpause?topic=p&channel=c").status == 200);
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("held") == 1; }));

  // A paused topic keeps what is published (its own depth), and hands it on when unpaused.
  REQUIRE(http_exchange(http, "POST", "/topic/pause?topic=p").status == 200);
  REQUIRE(http_exchange(http, "POST", "/pub?topic=p", "topic-held").body == "OK");
  CHECK(nsqd->topic_depth("p") == 1);
  REQUIRE(http_exchange(http, "POST", "/topic/empty?topic=p").status == 200);
  CHECK(nsqd->topic_depth("p") == 0);
  REQUIRE(http_exchange(http, "POST", "/pub?topic=p", "after-empty").body == "OK");
  REQUIRE(http_exchange(http, "POST", "/topic/unpause?topic=p").status == 200);
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("after-empty") == 1; }));
  CHECK(got.count("topic-held") == 0);

  // Deleting the channel closes its client, as nsqd does; the subscription comes back.
  REQUIRE(nsqd->client_count() >= 1);
  REQUIRE(http_exchange(http, "POST", "/channel/delete?topic=p&channel=c").status == 200);
  REQUIRE(nsqd->wait_until([&] { return nsqd->has_channel("p", "c"); }));  // re-subscribed
  REQUIRE(http_exchange(http, "POST", "/topic/delete?topic=p").status == 200);
  CHECK(http_exchange(http, "POST", "/topic/delete?topic=p").status == 404);
}

TEST_CASE("nsqd HTTP: /config/nsqlookupd_tcp_addresses reads and replaces the lookupd set",
          "[nsq][http][lookupd]") {
  LookupdOptions lookupd_options;
  lookupd_options.tcp_port = 0;
  auto lookupd = Lookupd::start(lookupd_options);
  auto nsqd = nsqd_with_http();
  const std::string http = nsqd->http_address();
  CHECK(http_exchange(http, "GET", "/config/nsqlookupd_tcp_addresses").body == "[]");
  const std::string set = "[\"" + lookupd->tcp_address() + "\"]";
  CHECK(http_exchange(http, "PUT", "/config/nsqlookupd_tcp_addresses", set).body == set);
  REQUIRE(http_exchange(http, "POST", "/topic/create?topic=configured").status == 200);
  REQUIRE(eventually([&] {
    return http_exchange(lookupd->http_address(), "GET", "/lookup?topic=configured").status == 200;
  }));
}

TEST_CASE(
    "nsqlookupd TCP: an nsqd registers, is found through /lookup and leaves with its "
    "connection",
    "[nsq][lookupd]") {
  LookupdOptions lookupd_options;
  lookupd_options.tcp_port = 0;
  auto lookupd = Lookupd::start(lookupd_options);
  NsqdOptions options;
  options.lookupd_tcp_addresses = {lookupd->tcp_address()};
  options.lookupd_ping_interval = std::chrono::milliseconds(50);
  auto nsqd = nsqd_with_http(options);
  auto producer = connect("nsq://" + nsqd->tcp_address() + "?" + kFast);
  REQUIRE(producer.publish_sync("registered", "first") == std::error_code{});
  const std::string lookup_http = lookupd->http_address();
  REQUIRE(eventually(
      [&] { return http_exchange(lookup_http, "GET", "/lookup?topic=registered").status == 200; }));
  const rapidjson::Document found =
      parse(http_exchange(lookup_http, "GET", "/lookup?topic=registered").body);
  REQUIRE(found["producers"].Size() == 1);
  CHECK(found["producers"][0]["tcp_port"].GetInt() == nsqd->tcp_port());
  CHECK(found["producers"][0]["http_port"].GetInt() == nsqd->http_port());

  Collector got;
  auto consumer = connect("nsq+lookupd://" + lookup_http +
                          "?lookupd_poll_interval=20ms&lookupd_poll_jitter=0&" + kFast);
  SubscribeOptions sub_options;
  sub_options.group = "finders";
  auto sub = consumer.subscribe("registered", sub_options,
                                [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("first") == 1; }));
  REQUIRE(eventually([&] {
    return http_exchange(lookup_http, "GET", "/channels?topic=registered").body ==
           R"({"channels":["finders"]})";
  }));

  // Stopped, its connection to nsqlookupd closes and it is no longer listed; resumed, it
  // registers again.
  nsqd->stop();
  REQUIRE(eventually([&] { return listed_producers(lookup_http, "registered") == 0; }));
  nsqd->resume();
  REQUIRE(eventually([&] { return listed_producers(lookup_http, "registered") == 1; }));
}

TEST_CASE("nsqlookupd TCP: bad input gets nsqlookupd's error and the connection closes",
          "[nsq][lookupd]") {
  LookupdOptions lookupd_options;
  lookupd_options.tcp_port = 0;
  auto lookupd = Lookupd::start(lookupd_options);
  const auto exchange = [&](const std::string& bytes) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), lookupd->tcp_port()});
    asio::write(socket, asio::buffer(bytes));
    std::string answers;
    std::error_code ec;
    asio::read(socket, asio::dynamic_buffer(answers), ec);  // to the close
    return answers;
  };
  CHECK(exchange("  V2") == size_prefixed("E_BAD_PROTOCOL"));
  CHECK(exchange("  V1REGISTER t\n") == size_prefixed("E_INVALID client must IDENTIFY"));
  CHECK(exchange("  V1PING\nBOGUS\n") ==
        size_prefixed("OK") + size_prefixed("E_INVALID invalid command BOGUS"));
  const std::string missing = "{\"broadcast_address\":\"h\"}";
  CHECK(exchange("  V1IDENTIFY\n" + be32(static_cast<std::uint32_t>(missing.size())) + missing) ==
        size_prefixed("E_BAD_BODY IDENTIFY missing fields"));
}

TEST_CASE(
    "nsqd TLS: tls_required refuses commands before the upgrade, require_verify refuses "
    "a client without a certificate",
    "[nsq][tls]") {
  TestCertificates certs;
  NsqdOptions options;
  options.tls_cert_file = certs.server_cert_file;
  options.tls_key_file = certs.server_key_file;
  options.tls_root_ca_file = certs.ca_file;
  options.tls_client_auth = NsqdOptions::TlsClientAuth::require_verify;
  auto nsqd = nsqd_with_http(options);

  // Before TLS: nsqd's fatal E_INVALID for any command but IDENTIFY.
  {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), nsqd->tcp_port()});
    asio::write(socket, asio::buffer(std::string("  V2PUB t\n") + be32(1) + "x"));
    std::string frames;
    std::error_code ec;
    asio::read(socket, asio::dynamic_buffer(frames), ec);
    CHECK(frames.find("E_INVALID cannot PUB in current state (TLS required)") != std::string::npos);
  }
  // HTTP is refused too (no HTTPS here).
  CHECK(http_exchange(nsqd->http_address(), "POST", "/pub?topic=t", "x").status == 403);

  const std::string base =
      "nsq://" + nsqd->tcp_address() + "?" + kFast +
      "&connect_timeout=2s&op_timeout=3s&tls=true&tls_ca_file=" + certs.ca_file;
  auto with_certificate = connect(base + "&tls_cert_file=" + certs.client_cert_file +
                                  "&tls_key_file=" + certs.client_key_file);
  CHECK(with_certificate.publish_sync("secure", "ok") == std::error_code{});
  auto without = connect(base);
  CHECK(without.publish_sync("secure", "refused") != std::error_code{});
  CHECK(nsqd->topic_message_count("secure") == 1);
}

TEST_CASE("nsqd: a new topic gets the channels nsqlookupd knows for it before its first message",
          "[nsq][lookupd]") {
  LookupdOptions lookupd_options;
  lookupd_options.tcp_port = 0;
  lookupd_options.broadcast_address = "127.0.0.1";
  auto lookupd = Lookupd::start(lookupd_options);
  const std::string lookup_http = lookupd->http_address();
  NsqdOptions options;
  options.lookupd_tcp_addresses = {lookupd->tcp_address()};
  options.lookupd_ping_interval = std::chrono::milliseconds(50);
  auto a = nsqd_with_http(options);
  auto b = nsqd_with_http(options);
  // The channel exists on a; b learns of it only through nsqlookupd.
  REQUIRE(http_exchange(a->http_address(), "POST", "/topic/create?topic=shared").status == 200);
  REQUIRE(
      http_exchange(a->http_address(), "POST", "/channel/create?topic=shared&channel=c").status ==
      200);
  REQUIRE(eventually([&] {
    return http_exchange(lookup_http, "GET", "/channels?topic=shared").body ==
           R"({"channels":["c"]})";
  }));
  // b's registration went through once its REGISTER did (after IDENTIFY's answer).
  REQUIRE(http_exchange(b->http_address(), "POST", "/topic/create?topic=warmup").status == 200);
  REQUIRE(eventually([&] { return listed_producers(lookup_http, "warmup") == 1; }));

  REQUIRE(http_exchange(b->http_address(), "POST", "/pub?topic=shared", "first").body == "OK");
  REQUIRE(b->wait_until([&] { return b->channel_depth("shared", "c") == 1; }));
  CHECK(b->topic_depth("shared") == 0);
}

TEST_CASE(
    "nsqd HTTP: the journal lists requests and their answers, and fault rules on a path answer "
    "an error, carry a request out twice, close the connection",
    "[nsq][http][journal][faults]") {
  NsqdOptions options;
  options.journal_capacity = 100;
  options.faults.push_back(testing::parse_fault_rule("unit=/pub,nth=2,error=503 overloaded"));
  options.faults.push_back(testing::parse_fault_rule("unit=/pub,nth=3,duplicate"));
  options.faults.push_back(testing::parse_fault_rule("unit=/stats,once,close"));
  auto nsqd = nsqd_with_http(options);
  const std::string http = nsqd->http_address();
  CHECK(http_exchange(http, "POST", "/pub?topic=t", "a").status == 200);
  const HttpAnswer refused = http_exchange(http, "POST", "/pub?topic=t", "b");
  CHECK(refused.status == 503);
  CHECK(refused.body == R"({"message":"overloaded"})");
  CHECK(http_exchange(http, "POST", "/pub?topic=t", "c").status == 200);
  CHECK(nsqd->topic_message_count("t") == 3);               // a, and c twice
  CHECK(http_exchange(http, "GET", "/stats").status == 0);  // closed unanswered
  CHECK(http_exchange(http, "GET", "/stats").status == 200);

  using polybus::testing::JournalEntry;
  const auto pubs =
      nsqd->journal().entries([](const JournalEntry& e) { return e.received && e.kind == "/pub"; });
  REQUIRE(pubs.size() == 3);
  CHECK(pubs[0].topic == "t");
  CHECK(pubs[0].text == "POST ?topic=t");
  CHECK(pubs[0].bytes == 1);
  std::vector<std::int64_t> statuses;
  for (const auto& e : nsqd->journal().entries(
           [](const JournalEntry& e) { return !e.received && e.kind == "response"; }))
    statuses.push_back(e.count);
  CHECK(statuses == std::vector<std::int64_t>{200, 503, 200, 200});
}

TEST_CASE(
    "nsqlookupd: a /lookup that fails once is polled again and the consumer finds its nsqd, and "
    "the journal lists every lookup",
    "[nsq][lookupd][journal][faults]") {
  LookupdOptions options;
  options.journal_capacity = 1000;
  options.faults.push_back(testing::parse_fault_rule("unit=/lookup,once,error=500 lookup failed"));
  auto lookupd = Lookupd::start(options);
  auto nsqd = Nsqd::start();
  nsqd->register_with(*lookupd);
  auto client =
      connect("nsq+lookupd://" + lookupd->http_address() + "?lookupd_poll_interval=50ms&" + kFast);
  REQUIRE(client.publish_sync("found", "x") == std::error_code{});
  Collector got;
  SubscribeOptions group;
  group.group = "g";
  auto sub =
      client.subscribe("found", group, [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(got.wait_until([](const auto& seen) { return seen.size() == 1; }));
  CHECK(lookupd->faults().fired(1) == 1);
  using polybus::testing::JournalEntry;
  const auto lookups = lookupd->journal().entries(
      [](const JournalEntry& e) { return e.received && e.kind == "/lookup"; });
  REQUIRE(lookups.size() >= 2);
  CHECK(lookups[0].topic == "found");
  const auto failed = lookupd->journal().entries(
      [](const JournalEntry& e) { return !e.received && e.count == 500; });
  CHECK(failed.size() == 1);
}

TEST_CASE("nsqlookupd: on a manual clock a tombstone lasts until the test advances past it",
          "[nsq][lookupd][clock]") {
  LookupdOptions options;
  options.clock = std::make_shared<polybus::ManualClock>();
  options.tombstone_lifetime = std::chrono::seconds(45);
  auto lookupd = Lookupd::start(options);
  lookupd->add_producer("t", "127.0.0.1", 4150, 4151);
  const std::string http = lookupd->http_address();
  const auto producers = [&] {
    const auto document = parse(http_exchange(http, "GET", "/lookup?topic=t").body);
    return document["producers"].Size();
  };
  REQUIRE(producers() == 1);
  REQUIRE(http_exchange(http, "POST", "/topic/tombstone?topic=t&node=127.0.0.1:4151").status ==
          200);
  CHECK(producers() == 0);
  options.clock->advance(std::chrono::seconds(44));
  CHECK(producers() == 0);
  options.clock->advance(std::chrono::seconds(1));
  CHECK(producers() == 1);
}
