// SPDX-License-Identifier: Apache-2.0
// The in-process nsqd and nsqlookupd against the real ones (nsq 1.3.0, through the harness):
// the same HTTP requests, hand-written and generated, get the same status, headers and bodies
// (JSON compared field by field, in order, ids, times, ports and host names aside); the same
// generated sequences of TCP commands get the same frames; each nsqd
// registers with the other's nsqlookupd and a consumer finds it there. docs/testing.md lists what
// differs on purpose.
#include <rapidjson/document.h>

#include <sys/socket.h>
#include <sys/time.h>

#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "http_exchange.hpp"
#include "nsq_harness_broker.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"
#include "wire_bytes.hpp"

using namespace polybus;
using namespace polybus::test;
using nsq::testing::Lookupd;
using nsq::testing::LookupdOptions;
using nsq::testing::Nsqd;
using nsq::testing::NsqdOptions;

namespace {

const std::string kFast = "reconnect_initial=10ms&reconnect_max=200ms";

// Values that differ between any two servers: when started, where, who connected.
const std::set<std::string> kVolatile = {"start_time", "hostname",         "http_port",
                                         "tcp_port",   "remote_address",   "connect_ts",
                                         "client_id",  "broadcast_address"};

// "" when equal, else where they differ first.
std::string compare_json(const rapidjson::Value& real, const rapidjson::Value& ours,
                         const std::string& path) {
  if (real.GetType() != ours.GetType() && !(real.IsNumber() && ours.IsNumber()) &&
      !(real.IsBool() && ours.IsBool())) {
    return path + ": types differ";
  }
  if (real.IsObject()) {
    auto r = real.MemberBegin();
    auto o = ours.MemberBegin();
    for (; r != real.MemberEnd() && o != ours.MemberEnd(); ++r, ++o) {
      const std::string name = r->name.GetString();
      if (name != o->name.GetString()) {
        return path + ": field " + name + " where ours has " + o->name.GetString();
      }
      if (name == "memory") continue;  // Go's runtime figures; ours are the stored bytes
      if (kVolatile.count(name) != 0) continue;
      const std::string inner = compare_json(r->value, o->value, path + "." + name);
      if (!inner.empty()) return inner;
    }
    if (r != real.MemberEnd()) return path + ": ours lacks " + r->name.GetString();
    if (o != ours.MemberEnd()) return path + ": ours has more, " + o->name.GetString();
    return "";
  }
  if (real.IsArray()) {
    if (real.Size() != ours.Size()) {
      return path + ": " + std::to_string(real.Size()) + " elements, ours " +
             std::to_string(ours.Size());
    }
    for (rapidjson::SizeType i = 0; i < real.Size(); ++i) {
      const std::string inner =
          compare_json(real[i], ours[i], path + "[" + std::to_string(i) + "]");
      if (!inner.empty()) return inner;
    }
    return "";
  }
  if (real.IsString()) {
    return std::string(real.GetString()) == ours.GetString() ? "" : path + ": values differ";
  }
  if (real.IsNumber()) return real.GetDouble() == ours.GetDouble() ? "" : path + ": values differ";
  if (real.IsBool()) return real.GetBool() == ours.GetBool() ? "" : path + ": values differ";
  return "";
}

// "" when the two answers agree: status, content types, Allow, and the body (JSON field by
// field; the text /stats page from its topics on).
std::string compare(const HttpAnswer& real, const HttpAnswer& ours, const std::string& target) {
  if (real.status != ours.status) {
    return "status " + std::to_string(real.status) + ", ours " + std::to_string(ours.status);
  }
  for (const char* header : {"content-type", "x-nsq-content-type", "allow"}) {
    if (real.header(header) != ours.header(header)) {
      return std::string(header) + " \"" + real.header(header) + "\", ours \"" +
             ours.header(header) + "\"";
    }
  }
  if (real.header("content-type").rfind("application/json", 0) == 0) {
    rapidjson::Document a, b;
    a.Parse(real.body.c_str());
    b.Parse(ours.body.c_str());
    if (a.HasParseError() || b.HasParseError()) {
      return real.body == ours.body ? "" : "body " + real.body + ", ours " + ours.body;
    }
    const std::string difference = compare_json(a, b, "$");
    return difference.empty() ? ""
                              : difference + "\n  real: " + real.body + "\n  ours: " + ours.body;
  }
  std::string a = real.body, b = ours.body;
  if (target.rfind("/stats", 0) == 0) {
    a = a.substr(std::min(a.find("\nTopics"), a.size()));
    b = b.substr(std::min(b.find("\nTopics"), b.size()));
  }
  return a == b ? "" : "body \"" + a + "\", ours \"" + b + "\"";
}

struct Request {
  std::string method, target, body;
};

// Sends the request to both; /stats is read again from the real nsqd until it agrees (within a
// bound), as nsqd hands messages from topic to channel in a goroutine of its own.
void expect_same(const std::string& real, const std::string& ours, const Request& request) {
  const HttpAnswer mine = http_exchange(ours, request.method, request.target, request.body);
  HttpAnswer theirs = http_exchange(real, request.method, request.target, request.body);
  std::string difference = compare(theirs, mine, request.target);
  if (!difference.empty() && request.target.rfind("/stats", 0) == 0) {
    eventually(
        [&] {
          theirs = http_exchange(real, request.method, request.target, request.body);
          difference = compare(theirs, mine, request.target);
          return difference.empty();
        },
        std::chrono::seconds(2));
  }
  INFO(request.method << " " << request.target << " [" << request.body.size() << " bytes]");
  CHECK(difference == "");
}

std::unique_ptr<Nsqd> our_nsqd(NsqdOptions options = {}) {
  options.http_port = 0;
  options.broadcast_address = "127.0.0.1";
  return Nsqd::start(std::move(options));
}

}  // namespace

TEST_CASE("drop-in: every nsqd HTTP endpoint answers as real nsqd 1.3 does",
          "[nsq][real][dropin]") {
  NsqHarness real({"-no-lookupd"});
  auto ours = our_nsqd();
  // The harness leaves nsqd's lookupd list nil (null) where a plain nsqd has [].
  REQUIRE(http_exchange(real.nsqd_http(), "PUT", "/config/nsqlookupd_tcp_addresses", "[]").status ==
          200);
  const std::vector<Request> requests = {
      {"GET", "/ping", ""},
      {"GET", "/info", ""},
      {"OPTIONS", "/pub", ""},
      {"GET", "/pub?topic=t", ""},
      {"DELETE", "/stats", ""},
      {"GET", "/nothing", ""},
      {"POST", "/pub?topic=t", ""},
      {"POST", "/pub", "x"},
      {"POST", "/pub?topic=bad!", "x"},
      {"POST", "/pub?topic=t&defer=-1", "x"},
      {"POST", "/pub?topic=t&defer=x", "x"},
      {"POST", "/pub?topic=t&defer=3600001", "x"},
      {"POST", "/pub?topic=t%zz", "x"},
      {"POST", "/pub?topic=t;u", "x"},
      {"POST", "/pub?topic=t", std::string(1024 * 1024 + 1, 'x')},
      {"POST", "/pub?topic=t", "hello"},
      {"POST", "/pub?topic=t&defer=600000", "later"},
      {"POST", "/mpub?topic=t", "a\nb\n\nc"},
      {"POST", "/mpub?topic=t&binary=true", be32(2) + be32(1) + "d" + be32(2) + "ee"},
      {"POST", "/mpub?topic=t&binary=1", "ab"},
      {"POST", "/mpub?topic=t&binary=yes", be32(0)},
      {"POST", "/mpub?topic=t&binary=1", be32(1) + be32(0)},
      {"POST", "/mpub?topic=t&binary=1", be32(1) + be32(5) + "abc"},
      {"POST", "/mpub?topic=empty", ""},
      {"GET", "/stats?format=json", ""},
      {"POST", "/topic/create", ""},
      {"POST", "/topic/create?topic=bad!", ""},
      {"POST", "/topic/create?topic=t2", ""},
      {"POST", "/channel/create?topic=t2", ""},
      {"POST", "/channel/create?topic=bad!&channel=c", ""},
      {"POST", "/channel/create?topic=t2&channel=bad!", ""},
      {"POST", "/channel/create?topic=nope&channel=c", ""},
      {"POST", "/channel/create?topic=t2&channel=c", ""},
      {"POST", "/channel/create?topic=t&channel=late", ""},
      {"POST", "/pub?topic=t2", "into-channel"},
      {"GET", "/stats?format=json", ""},
      {"GET", "/stats?format=json&topic=t2", ""},
      {"GET", "/stats?format=json&topic=t2&channel=c", ""},
      {"GET", "/stats?format=json&topic=t2&channel=nope", ""},
      {"GET", "/stats?format=json&topic=nope", ""},
      {"GET", "/stats?format=json&include_clients=false", ""},
      {"GET", "/stats?format=json&include_mem=false", ""},
      {"GET", "/stats?format=json&include_clients=maybe", ""},
      {"GET", "/stats", ""},
      {"POST", "/topic/pause?topic=t2", ""},
      {"POST", "/pub?topic=t2", "held-by-topic"},
      {"POST", "/channel/pause?topic=t2&channel=c", ""},
      {"GET", "/stats?format=json", ""},
      {"GET", "/stats", ""},
      {"POST", "/topic/unpause?topic=t2", ""},
      {"POST", "/channel/unpause?topic=t2&channel=c", ""},
      {"GET", "/stats?format=json", ""},
      {"POST", "/topic/pause", ""},
      {"POST", "/topic/pause?topic=nope", ""},
      {"POST", "/channel/pause?topic=t2&channel=nope", ""},
      {"POST", "/topic/empty?topic=bad!", ""},
      {"POST", "/topic/empty?topic=nope", ""},
      {"POST", "/topic/empty?topic=empty", ""},
      {"POST", "/channel/empty?topic=t2&channel=c", ""},
      {"POST", "/channel/empty?topic=t2&channel=nope", ""},
      {"GET", "/stats?format=json", ""},
      {"POST", "/channel/delete?topic=t2&channel=nope", ""},
      {"POST", "/channel/delete?topic=t2&channel=c", ""},
      {"POST", "/topic/delete", ""},
      {"POST", "/topic/delete?topic=nope", ""},
      {"POST", "/topic/delete?topic=t2", ""},
      {"GET", "/stats?format=json", ""},
      {"GET", "/config/nsqlookupd_tcp_addresses", ""},
      {"GET", "/config/max_msg_size", ""},
      {"GET", "/config/msg_timeout", ""},
      {"GET", "/config/max_rdy_count", ""},
      {"GET", "/config/bogus", ""},
      {"PUT", "/config/nsqlookupd_tcp_addresses", ""},
      {"PUT", "/config/nsqlookupd_tcp_addresses", "{"},
      {"PUT", "/config/max_msg_size", "5"},
      {"PUT", "/config/log_level", "loud"},
      {"PUT", "/config/nsqlookupd_tcp_addresses", "[]"},
  };
  for (const Request& request : requests)
    expect_same(real.nsqd_http(), ours->http_address(), request);
}

TEST_CASE("drop-in: generated HTTP sequences get the same answers from real nsqd and ours",
          "[nsq][real][dropin]") {
  NsqHarness real({"-no-lookupd"});
  auto ours = our_nsqd();
  // The harness leaves nsqd's lookupd list nil (null) where a plain nsqd has [].
  REQUIRE(http_exchange(real.nsqd_http(), "PUT", "/config/nsqlookupd_tcp_addresses", "[]").status ==
          200);
  // Seeded and bounded: the same sequence each run; a failure names the request.
  std::mt19937 random(20261201);
  const std::vector<std::string> topics = {"a", "b", "c#ephemeral", "bad!", "", "a%20"};
  const std::vector<std::string> channels = {"x", "y", "z#ephemeral", "bad!", ""};
  const std::vector<std::string> paths = {
      "/pub",           "/mpub",           "/topic/create",
      "/topic/delete",  "/topic/empty",    "/topic/pause",
      "/topic/unpause", "/channel/create", "/channel/delete",
      "/channel/empty", "/channel/pause",  "/channel/unpause",
      "/stats",         "/ping",           "/config/nsqlookupd_tcp_addresses"};
  const auto pick = [&](const auto& from) { return from[random() % from.size()]; };
  for (int i = 0; i < 300; ++i) {
    const std::string path = pick(paths);
    std::string query;
    if (random() % 8 != 0) query += "topic=" + pick(topics);
    if (random() % 3 != 0) query += "&channel=" + pick(channels);
    if (path == "/stats") query += "&format=json";
    if (path == "/pub" && random() % 5 == 0)
      query += "&defer=" + std::to_string(random() % 3 == 0 ? 900000 : 99999999);
    if (path == "/mpub" && random() % 3 == 0) query += "&binary=true";
    std::string body;
    if (path == "/pub" || path == "/mpub") {
      const int lines = static_cast<int>(random() % 4);
      for (int line = 0; line < lines; ++line) body += "m" + std::to_string(random() % 100) + "\n";
    }
    const bool get = path == "/stats" || path == "/ping" || path.rfind("/config", 0) == 0;
    const std::string method = random() % 20 == 0 ? "PUT" : get ? "GET" : "POST";
    expect_same(real.nsqd_http(), ours->http_address(), {method, path + "?" + query, body});
  }
  expect_same(real.nsqd_http(), ours->http_address(), {"GET", "/stats?format=json", ""});
}

TEST_CASE(
    "drop-in: real nsqd registers with our nsqlookupd, ours with the real one, and a "
    "consumer finds each",
    "[nsq][real][dropin][lookupd]") {
  // Real nsqd -> in-process nsqlookupd.
  LookupdOptions lookupd_options;
  lookupd_options.tcp_port = 0;
  auto our_lookupd = Lookupd::start(lookupd_options);
  NsqHarness real_nsqd({"-no-lookupd", "-join-lookupd", our_lookupd->tcp_address()});
  auto to_real = connect("nsq://" + real_nsqd.nsqd_tcp() + "?" + kFast);
  REQUIRE(to_real.publish_sync("crossed", "from-real") == std::error_code{});
  Collector got;
  auto consumer = connect("nsq+lookupd://" + our_lookupd->http_address() +
                          "?lookupd_poll_interval=50ms&lookupd_poll_jitter=0&" + kFast);
  SubscribeOptions options;
  options.group = "finders";
  auto sub = consumer.subscribe("crossed", options,
                                [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(sub.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got.wait_until([](const auto& seen) { return seen.count("from-real") == 1; }));

  // In-process nsqd -> real nsqlookupd; both lookupds answer /lookup alike.
  NsqHarness real_lookupd({"-lookupd-only"});
  NsqdOptions nsqd_options;
  nsqd_options.lookupd_tcp_addresses = {real_lookupd.lookupd_tcp()};
  auto ours = our_nsqd(nsqd_options);
  auto to_ours = connect("nsq://" + ours->tcp_address() + "?" + kFast);
  REQUIRE(to_ours.publish_sync("crossed", "from-ours") == std::error_code{});
  Collector got2;
  auto consumer2 = connect("nsq+lookupd://" + real_lookupd.lookupd_http() +
                           "?lookupd_poll_interval=50ms&lookupd_poll_jitter=0&" + kFast);
  auto sub2 = consumer2.subscribe("crossed", options,
                                  [&](Message& m) { got2.add(std::string(m.payload())); });
  REQUIRE(sub2.wait_ready(kWaitBound) == std::error_code{});
  REQUIRE(got2.wait_until([](const auto& seen) { return seen.count("from-ours") == 1; }));
  // Each nsqd tells its lookupd of a new channel from a loop of its own, after the SUB that made
  // it has been answered: wait until both lookupds list it before comparing them.
  const auto lists_channel = [](const std::string& lookupd) {
    return http_exchange(lookupd, "GET", "/channels?topic=crossed").body.find("\"finders\"") !=
           std::string::npos;
  };
  REQUIRE(eventually([&] { return lists_channel(real_lookupd.lookupd_http()); }));
  REQUIRE(eventually([&] { return lists_channel(our_lookupd->http_address()); }));
  for (const char* target : {"/lookup?topic=crossed", "/topics", "/channels?topic=crossed",
                             "/nodes", "/lookup?topic=nope", "/lookup", "/info", "/ping"}) {
    const HttpAnswer theirs = http_exchange(real_lookupd.lookupd_http(), "GET", target);
    const HttpAnswer mine = http_exchange(our_lookupd->http_address(), "GET", target);
    INFO(target);
    CHECK(compare(theirs, mine, target) == "");
  }
}

TEST_CASE("drop-in: nsqlookupd's HTTP actions answer as real nsqlookupd 1.3 does",
          "[nsq][real][dropin][lookupd]") {
  NsqHarness real({"-lookupd-only"});
  auto ours = Lookupd::start();
  const std::vector<Request> requests = {
      {"POST", "/topic/create", ""},
      {"POST", "/topic/create?topic=bad!", ""},
      {"POST", "/topic/create?topic=x", ""},
      {"POST", "/channel/create?topic=x", ""},
      {"POST", "/channel/create?topic=x&channel=bad!", ""},
      {"POST", "/channel/create?topic=x&channel=c", ""},
      {"GET", "/lookup?topic=x", ""},
      {"GET", "/topics", ""},
      {"GET", "/channels?topic=x", ""},
      {"GET", "/channels", ""},
      {"POST", "/topic/tombstone?topic=x", ""},
      {"POST", "/topic/tombstone?topic=x&node=127.0.0.1:1", ""},
      {"POST", "/channel/delete?topic=x&channel=nope", ""},
      {"POST", "/channel/delete?topic=x&channel=c", ""},
      {"POST", "/topic/delete?topic=nope", ""},
      {"POST", "/topic/delete?topic=x", ""},
      {"GET", "/topics", ""},
      {"GET", "/topic/create?topic=x", ""},
      {"POST", "/lookup?topic=x", ""},
      {"GET", "/nothing", ""},
      {"GET", "/lookup?topic=%zz", ""},
  };
  for (const Request& request : requests) {
    expect_same(real.lookupd_http(), ours->http_address(), request);
  }
}

namespace {

// One TCP connection to an nsqd, read frame by frame, with a 10 s bound on every read.
class V2Connection {
 public:
  explicit V2Connection(const std::string& address) : socket_(io_) {
    const auto colon = address.rfind(':');
    socket_.connect({asio::ip::make_address(address.substr(0, colon)),
                     static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
    timeval bound{10, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  }

  void send(const std::string& bytes) {
    std::error_code ec;
    asio::write(socket_, asio::buffer(bytes), ec);
  }

  // The frames up to the sentinel (an OK answering the marker PUB), or to the end of the
  // stream, each as "TYPE:BODY"; "EOF" last when the connection ended.
  std::vector<std::string> frames_until_sentinel() {
    std::vector<std::string> frames;
    while (true) {
      std::string header(8, '\0');
      std::error_code ec;
      asio::read(socket_, asio::buffer(header), ec);
      if (ec) {
        frames.push_back("EOF");
        return frames;
      }
      const auto size = static_cast<std::uint32_t>(read_big_endian<4>(header.data()));
      const auto type = static_cast<std::uint32_t>(read_big_endian<4>(header.data() + 4));
      std::string body(size >= 4 ? size - 4 : 0, '\0');
      asio::read(socket_, asio::buffer(body), ec);
      if (ec) {
        frames.push_back("EOF");
        return frames;
      }
      if (type == 0 && body == "_heartbeat_") continue;
      if (type == 0 && body == "OK" && expect_sentinel_) {
        expect_sentinel_ = false;
        return frames;
      }
      frames.push_back(std::to_string(type) + ":" + body);
    }
  }
  void mark_sentinel() { expect_sentinel_ = true; }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  bool expect_sentinel_ = false;
};

// A command of the V2 protocol, good or bad, in or out of order; no message is ever delivered
// (the subscribed topics are never published to), so that every answer is deterministic.
std::string generated_command(std::mt19937& random) {
  const auto pick = [&](const std::vector<std::string>& from) {
    return from[random() % from.size()];
  };
  const std::string topic = pick({"s", "s2", "bad!", "", "s#ephemeral"});
  const std::string published = pick({"p", "p2", "bad!", ""});
  const std::string channel = pick({"c", "c#ephemeral", "bad!", ""});
  const std::string id = pick({"0123456789abcdef", "short", ""});
  switch (random() % 15) {
    case 0:
      return "IDENTIFY\n" +
             size_prefixed(pick({R"({"feature_negotiation":true})",
                                 R"({"feature_negotiation":true,"heartbeat_interval":-1})",
                                 R"({"feature_negotiation":true,"msg_timeout":999})",
                                 R"({"client_id":"x","hostname":"h"})", "not json",
                                 R"({"feature_negotiation":true,"sample_rate":200})",
                                 R"({"feature_negotiation":true,"output_buffer_size":-1})"}));
    case 1:
      return "SUB " + topic + " " + channel + "\n";
    case 2:
      return "SUB " + topic + "\n";
    case 3:
      return "RDY " + pick({"0", "1", "2500", "2501", "-1", "x", ""}) + "\n";
    case 4:
      return "FIN " + id + "\n";
    case 5:
      return "REQ " + id + " " + pick({"0", "1000", "x"}) + "\n";
    case 6:
      return "TOUCH " + id + "\n";
    case 7:
      return "NOP\n";
    case 8:
      return "CLS\n";
    case 9:
      return "PUB " + published + "\n" + size_prefixed(pick({"m", "", std::string(5, 'x')}));
    case 10:
      return "MPUB " + published + "\n" +
             size_prefixed(be32(2) + size_prefixed("a") + size_prefixed(pick({"b", ""})));
    case 11:
      return "DPUB " + published + " " + pick({"600000", "x", "3600001"}) + "\n" +
             size_prefixed("d");
    case 12:
      return "AUTH\n" + size_prefixed("secret");
    case 13:
      return pick({"BOGUS\n", "PUB\n", "MPUB\n", "DPUB p\n", "REQ\n", "FIN\n", "TOUCH\n"});
    default:
      // A count nsqd refuses. (A body whose declared size disagrees with its messages is left
      // out: nsqd reads the messages on into the next command, docs/testing.md.)
      return "MPUB " + published + "\n" +
             size_prefixed(be32(pick({"0", "1"}) == "0" ? 0 : 0x7fffffff));
  }
}

}  // namespace

TEST_CASE("drop-in: generated TCP command sequences get the same frames from real nsqd and ours",
          "[nsq][real][dropin]") {
  NsqHarness real({"-no-lookupd"});
  auto ours = our_nsqd();
  std::mt19937 random(20261202);
  const std::string sentinel = "PUB sentinel\n" + size_prefixed("s");
  for (int sequence = 0; sequence < 200; ++sequence) {
    V2Connection theirs(real.nsqd_tcp());
    V2Connection mine(ours->tcp_address());
    theirs.send("  V2");
    mine.send("  V2");
    std::string sent;
    for (int step = 0; step < 12; ++step) {
      const std::string command = generated_command(random);
      sent += command.substr(0, command.find('\n')) + "; ";
      // Each command, then a PUB whose OK marks the end of the command's answers.
      theirs.send(command + sentinel);
      mine.send(command + sentinel);
      theirs.mark_sentinel();
      mine.mark_sentinel();
      const auto a = theirs.frames_until_sentinel();
      const auto b = mine.frames_until_sentinel();
      INFO("sequence " << sequence << ": " << sent);
      REQUIRE(a == b);
      if (!a.empty() && a.back() == "EOF") break;
    }
  }
  expect_same(real.nsqd_http(), ours->http_address(), {"GET", "/stats?format=json", ""});
}
