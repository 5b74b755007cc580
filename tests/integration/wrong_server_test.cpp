// SPDX-License-Identifier: Apache-2.0
// A client pointed at another protocol's server says what it found there (a likely wrong port
// or scheme), not only what failed to parse.
#include <catch2/catch.hpp>

#include "polybus/figg_testing.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

namespace {

// The detail of the first disconnected event of a client of `url` that tries to publish.
std::string first_drop(const std::string& url) {
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  auto client = connect(url, options);
  client.publish("t", "x", PublishOptions{std::chrono::seconds(5), {}}, nullptr);
  auto found = states.wait_for(
      [](const StateEvent& e) { return e.state == ConnectionState::disconnected && e.reason; });
  REQUIRE(found);
  return states.at(*found).detail;
}

}  // namespace

TEST_CASE("wrong server: a figg:// client at an nsqd says the server speaks NSQ",
          "[wrong_server]") {
  auto nsqd = nsq::testing::Nsqd::start();
  const auto detail =
      first_drop("figg://" + nsqd->tcp_address() + "?reconnect_initial=1h&reconnect_max=1h");
  CHECK_THAT(detail, Catch::Contains(nsqd->tcp_address()) &&
                         Catch::Contains("look like NSQ, not Figg: wrong port or scheme?"));
}

TEST_CASE("wrong server: an nsq:// client at nsqlookupd's HTTP port says the server speaks HTTP",
          "[wrong_server]") {
  auto lookupd = nsq::testing::Lookupd::start();
  const auto detail =
      first_drop("nsq://" + lookupd->http_address() + "?reconnect_initial=1h&reconnect_max=1h");
  CHECK_THAT(detail, Catch::Contains("look like HTTP, not NSQ"));
}

TEST_CASE("wrong server: a quickio:// client at an nsqd says the server speaks NSQ",
          "[wrong_server]") {
  auto nsqd = nsq::testing::Nsqd::start();
  const auto detail =
      first_drop("quickio://" + nsqd->tcp_address() + "?reconnect_initial=1h&reconnect_max=1h");
  CHECK_THAT(detail, Catch::Contains("look like NSQ, not QuickIO"));
}

TEST_CASE("wrong server: the right server gives no such hint", "[wrong_server]") {
  auto broker = figg::testing::Broker::launch();
  StateRecorder states;
  ConnectOptions options;
  options.on_state = states.callback();
  {
    auto client = connect("figg://" + broker->address(), options);
    REQUIRE(client.publish_sync("t", "x") == std::error_code{});
    broker->stop();  // a drop that has nothing to do with the protocol
    REQUIRE(states.wait_for(
        [](const StateEvent& e) { return e.state == ConnectionState::disconnected && e.reason; }));
  }
  for (const auto& e : states.events()) CHECK(e.detail.find("look like") == std::string::npos);
}
