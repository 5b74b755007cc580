// SPDX-License-Identifier: Apache-2.0
// Request/reply as every broker that has it must give it: each reply reaches the request it
// answers, several servers answer each request once, a close waits for the replies its handlers
// send. Where the protocol has none of its own (NSQ, Figg), the +cloudevents variants run these
// over topics; without the envelope the refusal names the option.
#include <set>

#include "contract.hpp"

using namespace polybus;
using namespace polybus::contract;

namespace {
// Requests in flight at once: enough that replies come back in another order than asked.
constexpr int kConcurrent = 40;
}  // namespace

CONTRACT_CASE(without_request_reply_of_its_own_a_request_names_the_envelope_option) {
  CONTRACT_REQUIRES(!env.caps.request_reply && env.caps.publish && env.caps.subscribe);
  auto client = env.connect();
  const Status refused = client.request_sync(unique_name("plain"), "q", 5s).status();
  INFO(refused.message());
  CHECK(refused == errc::not_supported);
  const bool via_lookupd = env.url.rfind("nsq+lookupd://", 0) == 0;
  // Through nsqlookupd a reply topic would be found only at its poll: it says to use nsq://.
  const std::string names = via_lookupd ? "nsq://" : "envelope=cloudevents";
  CHECK_THAT(refused.cause(), Catch::Contains(names));
  try {
    client.serve(unique_name("plain"), [](Message&) { return std::string(); });
    FAIL("serve accepted without request/reply");
  } catch (const Error& e) {
    CHECK(e.code() == errc::not_supported);
    CHECK_THAT(std::string(e.what()), Catch::Contains(names));
  }
  CHECK(client.close_sync(5s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(concurrent_requests_each_get_the_reply_to_their_own_payload) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto server = env.connect();
  auto client = env.connect();
  const auto topic = unique_name("rpc-many");
  SubscribeOptions options;
  options.concurrency = 4;  // replies leave in another order than the requests came
  auto sub =
      server.serve(topic, options, [](Message& m) { return "re:" + std::string(m.payload()); });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  std::mutex mutex;
  std::vector<std::pair<std::string, Reply>> replies;
  Latch answered;
  for (int i = 0; i < kConcurrent; ++i) {
    const std::string payload = "q" + std::to_string(i);
    client.request(topic, payload, 10s, [&, payload](Reply reply) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        replies.emplace_back(payload, std::move(reply));
      }
      answered.count_down();
    });
  }
  REQUIRE(answered.wait_for(kConcurrent));
  std::lock_guard<std::mutex> lock(mutex);
  REQUIRE(replies.size() == static_cast<std::size_t>(kConcurrent));
  for (const auto& [payload, reply] : replies) {
    INFO(payload << ": " << reply.status().message());
    CHECK(reply.ec == std::error_code{});
    CHECK(reply.payload == "re:" + payload);
  }
  CHECK(client.close_sync(5s) == std::error_code{});
  CHECK(server.close_sync(5s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(with_two_servers_every_request_is_answered_once) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto first = env.connect();
  auto second = env.connect();
  auto client = env.connect();
  const auto topic = unique_name("rpc-two");
  auto serve_as = [&](Client& server, const std::string& name) {
    return server.serve(topic,
                        [name](Message& m) { return name + ":" + std::string(m.payload()); });
  };
  auto a = serve_as(first, "a");
  auto b = serve_as(second, "b");
  REQUIRE(a.wait_ready(test::kWaitBound) == std::error_code{});
  REQUIRE(b.wait_ready(test::kWaitBound) == std::error_code{});
  for (int i = 0; i < 10; ++i) {
    const std::string payload = "q" + std::to_string(i);
    auto reply = client.request_sync(topic, payload, 10s);
    INFO(reply.status().message());
    REQUIRE(reply.ec == std::error_code{});
    // Either server's, whole: one reply per request, never a mix or another request's.
    CHECK((reply.payload == "a:" + payload || reply.payload == "b:" + payload));
  }
  CHECK(client.close_sync(5s) == std::error_code{});
  CHECK(first.close_sync(5s) == std::error_code{});
  CHECK(second.close_sync(5s) == std::error_code{});
}

CONTRACT_REQUEST_CASE(a_close_waits_for_the_reply_a_running_serve_handler_sends) {
  CONTRACT_REQUIRES(env.caps.request_reply);
  auto server = env.connect();
  auto client = env.connect();
  const auto topic = unique_name("rpc-closing");
  Latch handling, closing;
  auto sub = server.serve(topic, [&](Message& m) {
    handling.count_down();
    closing.wait_for(1);  // a bound: the test releases it once the close has begun
    return "late:" + std::string(m.payload());
  });
  REQUIRE(sub.wait_ready(test::kWaitBound) == std::error_code{});
  Latch replied;
  Reply reply;
  client.request(topic, "q", 10s, [&](Reply r) {
    reply = std::move(r);
    replied.count_down();
  });
  REQUIRE(handling.wait_for(1));
  Latch closed;
  Status close_result;
  server.close(10s, [&](const Status& s) {
    close_result = s;
    closed.count_down();
  });
  closing.count_down();
  REQUIRE(replied.wait_for(1));
  INFO(reply.status().message());
  CHECK(reply.ec == std::error_code{});
  CHECK(reply.payload == "late:q");
  REQUIRE(closed.wait_for(1));
  CHECK(close_result == std::error_code{});
  CHECK(client.close_sync(5s) == std::error_code{});
}
