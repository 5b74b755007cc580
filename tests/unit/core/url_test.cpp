// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "polybus/error.hpp"
#include "polybus/url.hpp"

using namespace polybus;

TEST_CASE("a URL with several hosts and a query parses", "[url]") {
  auto url = Url::parse("nsq://a:4150,b.example:4151?max_in_flight=10&client_id=x%20y");
  CHECK(url.scheme == "nsq");
  REQUIRE(url.hosts.size() == 2);
  CHECK(url.hosts[0].host == "a");
  CHECK(url.hosts[0].port == 4150);
  CHECK(url.hosts[1].to_string() == "b.example:4151");
  CHECK(url.query.values().at("max_in_flight") == "10");
  CHECK(url.query.values().at("client_id") == "x y");
}

TEST_CASE("IPv6 literals, ipc paths and bare names parse", "[url]") {
  auto v6 = Url::parse("memodb+tcp://[::1]:12701");
  REQUIRE(v6.hosts.size() == 1);
  CHECK(v6.hosts[0].host == "::1");
  CHECK(v6.hosts[0].port == 12701);
  CHECK(v6.hosts[0].to_string() == "[::1]:12701");
  auto ipc = Url::parse("memodb+ipc:///tmp/memodb.socket");
  CHECK(ipc.hosts.empty());
  CHECK(ipc.path == "/tmp/memodb.socket");
  auto mem = Url::parse("mem://demo");
  REQUIRE(mem.hosts.size() == 1);
  CHECK(mem.hosts[0].host == "demo");
  CHECK(mem.hosts[0].port == 0);
  CHECK(mem.hosts_or_throw(4150)[0].port == 4150);
}

TEST_CASE("malformed URLs are rejected with a reason", "[url]") {
  for (const char* text :
       {"", "nsq", "://host", "NSQ://a:1", "nsq://a:0", "nsq://a:65536", "nsq://a:x",
        "nsq://a:", "nsq://a,", "nsq://[::1", "nsq://[::1]x", "nsq://a:1?novalue", "nsq://a:1?=v",
        "nsq://a:1?k=%zz", "nsq://a:1?k=%2", "nsq://a:1?k=1&k=2", "nsq://:4150"}) {
    INFO(text);
    try {
      Url::parse(text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == errc::invalid_url);
      CHECK(std::string(e.what()).find("invalid URL") != std::string::npos);
    }
  }
}

TEST_CASE("a URL without a host cannot give hosts", "[url]") {
  auto url = Url::parse("nsq:///path");
  CHECK_THROWS_AS(url.hosts_or_throw(4150), Error);
}
