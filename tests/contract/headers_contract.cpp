// SPDX-License-Identifier: Apache-2.0
// Headers, the CloudEvents envelope and the trace hooks: the same on every broker, through the
// URL alone (envelope=cloudevents).
#include <map>
#include <mutex>
#include <set>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {

const Options kEnvelope{{"envelope", "cloudevents"}};

}  // namespace

CONTRACT_CASE(headers_travel_in_the_envelope_and_come_back_with_the_payload_unchanged) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Received seen;
  auto client = env.connect(kEnvelope);
  REQUIRE(client.carries_headers());
  auto topic = unique_name("headers");
  SubscribeOptions in_order;
  in_order.concurrency = 1;
  auto sub = client.subscribe(topic, in_order, [&](Message& m) { seen.add(m); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  const std::string binary("\x00\xff\x01 not text", 11);
  const std::vector<std::pair<std::string, Headers>> sent{
      {"text with \"quotes\" and \\ and \xc3\xa9",
       {{"correlationid", "c-1"},
        {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}},
      {binary, {{"correlationid", "c-2"}}},
      {R"({"order":42,"items":[1,2]})",
       {{"datacontenttype", "application/json"}, {"subject", "orders"}}},
      {"", {}},
  };
  for (const auto& [payload, headers] : sent) {
    PublishOptions options;
    options.headers = headers;
    REQUIRE(client.publish_sync(topic, payload, options) == std::error_code{});
  }
  REQUIRE(seen.arrived.wait_for(sent.size()));
  std::map<std::string, Headers> by_payload;
  for (std::size_t i = 0; i < sent.size(); ++i) by_payload.insert(seen.at(i));
  std::set<std::string> ids;
  for (const auto& [payload, headers] : sent) {
    INFO("payload: " << payload);
    REQUIRE(by_payload.count(payload) == 1);
    const Headers& got = by_payload[payload];
    for (const auto& [name, value] : headers) CHECK(got.get(name) == value);
    CHECK(got.get("specversion") == "1.0");
    CHECK(got.get("source") == "/polybus");
    CHECK(got.get("type") == "polybus.message");
    REQUIRE(got.get("id").has_value());
    ids.insert(std::string(*got.get("id")));
  }
  CHECK(ids.size() == sent.size());  // each message its own id
  CHECK(client.stats().delivered_raw == 0);
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(a_payload_that_is_not_an_envelope_is_delivered_raw_and_counted) {
  CONTRACT_REQUIRES(env.caps.publish && env.caps.subscribe);
  Received seen;
  auto plain = env.connect();  // what another client of the broker sends
  auto enveloped = env.connect(kEnvelope);
  auto topic = unique_name("raw");
  auto sub = enveloped.subscribe(topic, {}, [&](Message& m) { seen.add(m); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  const std::string foreign = R"({"specversion":"1.0","id":"no source or type"})";
  REQUIRE(plain.publish_sync(topic, foreign) == std::error_code{});
  REQUIRE(seen.arrived.wait_for(1));
  auto [payload, headers] = seen.at(0);
  CHECK(payload == foreign);
  CHECK(headers.empty());
  CHECK(enveloped.stats().delivered_raw == 1);
  CHECK(enveloped.close_sync(5s) == std::error_code{});
  CHECK(plain.close_sync(5s) == std::error_code{});
}

CONTRACT_CASE(
    headers_without_the_envelope_fail_with_not_supported_and_bad_names_with_invalid_argument) {
  CONTRACT_REQUIRES(env.caps.publish || env.caps.request_reply);
  auto plain = env.connect();
  auto enveloped = env.connect(kEnvelope);
  CHECK_FALSE(plain.carries_headers());
  auto topic = unique_name("noheaders");
  if (env.caps.publish) {
    PublishOptions options;
    options.headers.set("correlationid", "1");
    Status refused = plain.publish_sync(topic, "x", options);
    CHECK(refused.code() == make_error_code(errc::not_supported));
    CHECK_THAT(refused.cause(), Catch::Contains("envelope=cloudevents"));
    options.headers.set("Bad-Name", "1");
    refused = enveloped.publish_sync(topic, "x", options);
    CHECK(refused.code() == make_error_code(errc::invalid_argument));
    CHECK_THAT(refused.cause(), Catch::Contains("Bad-Name"));
    CHECK(plain.stats().publish_failed == 1);
  }
  if (env.caps.request_reply) {
    RequestOptions options;
    options.headers.set("correlationid", "1");
    options.timeout = 2s;
    Reply reply = plain.request_sync(topic, "x", options);
    CHECK(reply.ec == make_error_code(errc::not_supported));
    CHECK_THAT(reply.detail, Catch::Contains("envelope=cloudevents"));
  }
}

CONTRACT_REQUEST_CASE(request_headers_reach_serve_and_the_reply_comes_back_unwrapped) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  Received seen;
  auto server = env.connect(kEnvelope);
  auto requester = env.connect(kEnvelope);
  auto topic = unique_name("rpc-headers");
  auto serving = server.serve(topic, [&](Message& m) {
    seen.add(m);
    return "re: " + std::string(m.payload());
  });
  REQUIRE(serving.wait_ready(test::kWaitBound) == std::error_code{});
  RequestOptions options;
  options.headers.set("correlationid", "rpc-7");
  Reply reply;
  // A server that registered may take a moment to be routable (MemoDB's worker, say).
  REQUIRE(test::eventually([&] {
    reply = requester.request_sync(topic, "question", options);
    return !reply.ec;
  }));
  CHECK(reply.payload == "re: question");
  CHECK(reply.headers.get("type") == "polybus.message.reply");
  CHECK(reply.headers.get("specversion") == "1.0");
  REQUIRE(seen.arrived.count() >= 1);
  auto [payload, headers] = seen.at(0);
  CHECK(payload == "question");
  CHECK(headers.get("correlationid") == "rpc-7");
}

CONTRACT_CASE(trace_hooks_carry_a_traceparent_from_the_publisher_to_the_handler) {
  CONTRACT_REQUIRES((env.caps.publish && env.caps.subscribe) || env.caps.request_reply);
  // A hand-written W3C trace context: the publisher's hook injects its span, the subscriber's
  // extracts it and keeps a scope open while the handler runs.
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  std::atomic<int> scopes_open{0}, scopes_seen_by_handler{0};
  std::mutex mutex;
  std::vector<std::string> extracted;
  Latch handled;
  ConnectOptions publisher_options;
  publisher_options.options = kEnvelope;
  publisher_options.trace.inject = [&](std::string_view, Headers& headers) {
    headers.set("traceparent", "00-" + trace_id + "-00f067aa0ba902b7-01");
    headers.set("tracestate", "polybus=test");
  };
  ConnectOptions consumer_options;
  consumer_options.options = kEnvelope;
  consumer_options.trace.extract = [&](const Message& m) -> std::shared_ptr<void> {
    {
      std::lock_guard<std::mutex> lock(mutex);
      extracted.emplace_back(m.headers().get("traceparent").value_or("(none)"));
    }
    ++scopes_open;
    return std::shared_ptr<void>(nullptr, [&](void*) { --scopes_open; });
  };
  auto publisher = polybus::connect(env.url, publisher_options);
  auto consumer = polybus::connect(env.url, consumer_options);
  auto topic = unique_name("trace");
  Subscription sub;
  if (env.caps.publish && env.caps.subscribe) {
    sub = consumer.subscribe(topic, {}, [&](Message&) {
      scopes_seen_by_handler += scopes_open.load();
      handled.count_down();
    });
    REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
    REQUIRE(publisher.publish_sync(topic, "traced") == std::error_code{});
  } else {
    sub = consumer.serve(topic, [&](Message&) {
      scopes_seen_by_handler += scopes_open.load();
      handled.count_down();
      return std::string("ok");
    });
    REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
    REQUIRE(test::eventually([&] { return !publisher.request_sync(topic, "traced", 2s).ec; }));
  }
  REQUIRE(handled.wait_for(1));
  CHECK(test::eventually([&] { return scopes_open.load() == 0; }));  // released after the handler
  CHECK(scopes_seen_by_handler.load() >= 1);
  std::lock_guard<std::mutex> lock(mutex);
  REQUIRE_FALSE(extracted.empty());
  CHECK(extracted.front() == "00-" + trace_id + "-00f067aa0ba902b7-01");
}
