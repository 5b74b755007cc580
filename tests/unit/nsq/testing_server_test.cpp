// SPDX-License-Identifier: Apache-2.0
// The in-process nsqd and nsqlookupd, driven over real sockets with plain blocking asio and the
// NSQ codec, the way a client would see them. Expected texts are nsqd 1.3's, checked against it.
#include <unistd.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/nsq/codec.hpp"
#include "polybus/nsq/compression.hpp"
#include "polybus/nsq_testing.hpp"
#include "polybus/testing.hpp"
#include "tls_certs.hpp"

using namespace polybus::nsq;
using namespace std::chrono_literals;
using namespace std::string_literals;
using polybus::nsq::testing::Lookupd;
using polybus::nsq::testing::Nsqd;
using polybus::nsq::testing::NsqdOptions;

namespace {

// Only a failing test waits this long.
constexpr std::chrono::milliseconds kBound = 10s;

struct ReceivedFrame {
  FrameType type = FrameType::response;
  std::string body;
};

struct ReceivedMessage {
  std::int64_t timestamp_ns = 0;
  std::uint16_t attempts = 0;
  std::string id;
  std::string body;
};

std::string be32(std::uint32_t value) {
  std::string bytes(4, '\0');
  for (int i = 3; i >= 0; --i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return bytes;
}

// A client over a blocking socket: writes go straight out, reads wait until a deadline so that a
// missing answer fails the test instead of hanging it.
class WireClient {
 public:
  explicit WireClient(std::uint16_t port, bool send_magic = true) : socket_(io_) {
    socket_.connect({asio::ip::make_address_v4("127.0.0.1"), port});
    socket_.set_option(asio::ip::tcp::no_delay(true));
    if (send_magic) write(std::string(kMagicV2));
  }

  // Sends bytes at the frame layer: compressed and encrypted as negotiated.
  void write(std::string_view plain) {
    std::string wire;
    if (codec_) {
      REQUIRE_FALSE(codec_->encode(plain, wire));
    } else {
      wire.assign(plain);
    }
    std::error_code ec;  // a server that closed already refuses: tests check what they read
    if (tls_) {
      asio::write(*tls_, asio::buffer(wire), ec);
    } else {
      asio::write(socket_, asio::buffer(wire), ec);
    }
  }

  // Sends bytes as they are, past the negotiated compression.
  void write_raw(std::string_view wire) {
    std::error_code ec;
    asio::write(socket_, asio::buffer(wire), ec);
  }

  // The next frame, or nullopt when the server closed or `bound` passed first.
  std::optional<ReceivedFrame> next_frame(std::chrono::milliseconds bound = kBound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (true) {
      if (auto frame = parse_one()) return frame;
      if (closed_ || !read_some(deadline)) return std::nullopt;
    }
  }

  ReceivedFrame frame() {
    auto received = next_frame();
    REQUIRE(received);
    return *received;
  }

  // The next frame that is not a heartbeat (each is answered with NOP, as clients do).
  ReceivedFrame frame_skipping_heartbeats() {
    while (true) {
      ReceivedFrame received = frame();
      if (received.type == FrameType::response && received.body == kHeartbeatBody) {
        nop();
        continue;
      }
      return received;
    }
  }

  void expect_response(std::string_view body) {
    const ReceivedFrame received = frame_skipping_heartbeats();
    CHECK(received.type == FrameType::response);
    CHECK(received.body == body);
  }

  void expect_error(std::string_view body) {
    const ReceivedFrame received = frame_skipping_heartbeats();
    CHECK(received.type == FrameType::error);
    CHECK(received.body == body);
  }

  ReceivedMessage message() {
    const ReceivedFrame received = frame_skipping_heartbeats();
    REQUIRE(received.type == FrameType::message);
    MessageView view;
    REQUIRE_FALSE(parse_message(received.body, view));
    return {view.timestamp_ns, view.attempts, std::string(view.id), std::string(view.body)};
  }

  // True when the server closes the connection within `bound`; frames before that are dropped.
  bool closed_within(std::chrono::milliseconds bound = kBound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!closed_) {
      plain_.clear();
      if (!read_some(deadline)) return closed_;
    }
    return true;
  }

  // Nothing arrives for `quiet`: used only where a frame would be the failure.
  bool silent_for(std::chrono::milliseconds quiet) { return !next_frame(quiet).has_value(); }

  // Commands.
  void identify(std::string_view json) {
    std::string out;
    REQUIRE_FALSE(append_identify(out, json));
    write(out);
  }
  void sub(std::string_view topic, std::string_view channel) {
    std::string out;
    REQUIRE_FALSE(append_sub(out, topic, channel));
    write(out);
  }
  void rdy(std::uint32_t count) {
    std::string out;
    append_rdy(out, count);
    write(out);
  }
  void fin(std::string_view id) {
    std::string out;
    REQUIRE_FALSE(append_fin(out, id));
    write(out);
  }
  void req(std::string_view id, std::uint32_t delay_ms) {
    std::string out;
    REQUIRE_FALSE(append_req(out, id, delay_ms));
    write(out);
  }
  void touch(std::string_view id) {
    std::string out;
    REQUIRE_FALSE(append_touch(out, id));
    write(out);
  }
  void nop() {
    std::string out;
    append_nop(out);
    write(out);
  }
  void cls() {
    std::string out;
    append_cls(out);
    write(out);
  }
  void pub(std::string_view topic, std::string_view body) {
    std::string out;
    REQUIRE_FALSE(append_pub(out, topic, body));
    write(out);
  }
  void dpub(std::string_view topic, std::uint32_t defer_ms, std::string_view body) {
    std::string out;
    REQUIRE_FALSE(append_dpub(out, topic, defer_ms, body));
    write(out);
  }
  void mpub(std::string_view topic, const std::vector<std::string>& bodies) {
    std::string out;
    REQUIRE_FALSE(append_mpub(out, topic, bodies));
    write(out);
  }
  void auth(std::string_view secret) {
    std::string out;
    REQUIRE_FALSE(append_auth(out, secret));
    write(out);
  }

  // Layers, switched on as a client does after reading IDENTIFY's response.
  void use_codec(std::unique_ptr<StreamCodec> codec) {
    codec_ = std::move(codec);
    // Whatever came after the last frame read belongs to the compressed stream.
    std::string leftover;
    leftover.swap(plain_);
    REQUIRE_FALSE(codec_->decode(leftover, plain_));
  }

  void start_tls(const std::string& ca_file) {
    REQUIRE(plain_.empty());
    tls_context_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    tls_context_->load_verify_file(ca_file);
    tls_context_->set_verify_mode(asio::ssl::verify_peer);
    tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(socket_, *tls_context_);
    tls_->handshake(asio::ssl::stream_base::client);
  }

  void close() { socket_.close(); }

 private:
  std::optional<ReceivedFrame> parse_one() {
    while (!plain_.empty()) {
      Frame frame;
      const FrameParser::Result result = parser_.feed(plain_, frame);
      REQUIRE_FALSE(result.error);
      std::optional<ReceivedFrame> received;
      if (result.has_frame) received = ReceivedFrame{frame.type, std::string(frame.body)};
      plain_.erase(0, result.consumed);
      if (received) return received;
    }
    return std::nullopt;
  }

  // Waits for bytes with an asynchronous read run until the deadline: a TLS stream may hold
  // bytes already read from the socket, which polling the socket would not see.
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    bool done = false;
    std::error_code ec;
    std::size_t n = 0;
    auto on_read = [&](std::error_code error, std::size_t size) {
      done = true;
      ec = error;
      n = size;
    };
    if (tls_) {
      tls_->async_read_some(asio::buffer(buffer_), on_read);
    } else {
      socket_.async_read_some(asio::buffer(buffer_), on_read);
    }
    io_.restart();
    io_.run_until(deadline);
    if (!done) {
      socket_.cancel();
      io_.restart();
      io_.run();
      if (ec == asio::error::operation_aborted) return false;
    }
    if (ec) {
      closed_ = true;
      return true;
    }
    const std::string_view raw(buffer_.data(), n);
    if (codec_) {
      REQUIRE_FALSE(codec_->decode(raw, plain_));
    } else {
      plain_.append(raw);
    }
    return true;
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::context> tls_context_;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> tls_;
  std::unique_ptr<StreamCodec> codec_;
  FrameParser parser_{64 * 1024 * 1024};
  std::vector<char> buffer_ = std::vector<char>(64 * 1024);
  std::string plain_;  // bytes at the frame layer not parsed yet
  bool closed_ = false;
};

constexpr std::string_view kNegotiate = R"({"feature_negotiation":true})";

// A consumer on topic/channel with the given RDY, after an IDENTIFY with `identify_json`.
std::unique_ptr<WireClient> consumer(const Nsqd& nsqd, std::string_view topic,
                                     std::string_view channel, std::uint32_t rdy,
                                     std::string_view identify_json = {}) {
  auto client = std::make_unique<WireClient>(nsqd.tcp_port());
  if (!identify_json.empty()) {
    client->identify(identify_json);
    const ReceivedFrame response = client->frame();
    REQUIRE(response.type == FrameType::response);
  }
  client->sub(topic, channel);
  client->expect_response("OK");
  if (rdy > 0) client->rdy(rdy);
  return client;
}

void publish(const Nsqd& nsqd, std::string_view topic, std::string_view body) {
  WireClient producer(nsqd.tcp_port());
  producer.pub(topic, body);
  producer.expect_response("OK");
}

bool is_hex_id(std::string_view id) {
  return id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Connecting and IDENTIFY

TEST_CASE("nsqd: PUB after the magic is answered OK and a topic with no channel holds the message",
          "[nsq_testing]") {
  auto nsqd = Nsqd::start();
  CHECK(nsqd->tcp_address() == "127.0.0.1:" + std::to_string(nsqd->tcp_port()));
  WireClient client(nsqd->tcp_port());
  client.pub("orders", "first");
  client.expect_response("OK");
  CHECK(nsqd->has_topic("orders"));
  CHECK(nsqd->topic_depth("orders") == 1);
  CHECK(nsqd->topic_message_count("orders") == 1);
  CHECK(nsqd->channels("orders").empty());
}

TEST_CASE("nsqd: a wrong magic is answered E_BAD_PROTOCOL and the connection closes",
          "[nsq_testing]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port(), false);
  client.write("  V1");
  client.expect_error("E_BAD_PROTOCOL");
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: IDENTIFY without feature negotiation answers OK", "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"client_id":"c","hostname":"h","user_agent":"test/1"})");
  client.expect_response("OK");
}

TEST_CASE("nsqd: IDENTIFY with feature negotiation answers nsqd's JSON with the agreed values",
          "[nsq_testing][identify]") {
  NsqdOptions options;
  options.max_rdy_count = 200;
  auto nsqd = Nsqd::start(options);
  WireClient client(nsqd->tcp_port());
  client.identify(
      R"({"feature_negotiation":true,"msg_timeout":5000,"sample_rate":0,)"
      R"("output_buffer_size":4096,"output_buffer_timeout":100,"heartbeat_interval":2000})");
  client.expect_response(
      R"({"max_rdy_count":200,"version":"1.3.0","max_msg_timeout":900000,"msg_timeout":5000,)"
      R"("tls_v1":false,"deflate":false,"deflate_level":6,"max_deflate_level":6,"snappy":false,)"
      R"("sample_rate":0,"auth_required":false,"output_buffer_size":4096,)"
      R"("output_buffer_timeout":100})");
}

TEST_CASE("nsqd: IDENTIFY defaults are nsqd's when the client asks for nothing",
          "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(kNegotiate);
  client.expect_response(
      R"({"max_rdy_count":2500,"version":"1.3.0","max_msg_timeout":900000,"msg_timeout":60000,)"
      R"("tls_v1":false,"deflate":false,"deflate_level":6,"max_deflate_level":6,"snappy":false,)"
      R"("sample_rate":0,"auth_required":false,"output_buffer_size":16384,)"
      R"("output_buffer_timeout":250})");
}

TEST_CASE("nsqd: IDENTIFY refuses out-of-range settings with E_BAD_BODY and closes",
          "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"heartbeat_interval":999})", "E_BAD_BODY IDENTIFY heartbeat interval (999) is invalid"},
      {R"({"heartbeat_interval":60001})",
       "E_BAD_BODY IDENTIFY heartbeat interval (60001) is invalid"},
      {R"({"msg_timeout":999})", "E_BAD_BODY IDENTIFY msg timeout (999) is invalid"},
      {R"({"msg_timeout":900001})", "E_BAD_BODY IDENTIFY msg timeout (900001) is invalid"},
      {R"({"sample_rate":100})", "E_BAD_BODY IDENTIFY sample rate (100) is invalid"},
      {R"({"output_buffer_timeout":10})",
       "E_BAD_BODY IDENTIFY output buffer timeout (10) is invalid"},
      {R"({"output_buffer_size":32})", "E_BAD_BODY IDENTIFY output buffer size (32) is invalid"},
      {R"({"heartbeat_interval":"1000"})", "E_BAD_BODY IDENTIFY failed to decode JSON body"},
      {R"({"msg_timeout":1500.5})", "E_BAD_BODY IDENTIFY failed to decode JSON body"},
      {R"([1,2])", "E_BAD_BODY IDENTIFY failed to decode JSON body"},
      {R"({"client_id":)", "E_BAD_BODY IDENTIFY failed to decode JSON body"},
  };
  for (const auto& [json, error] : cases) {
    INFO(json);
    WireClient client(nsqd->tcp_port());
    client.identify(json);
    client.expect_error(error);
    CHECK(client.closed_within());
  }
}

TEST_CASE("nsqd: IDENTIFY matches field names case-insensitively and ignores unknown ones",
          "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"Feature_Negotiation":true,"MSG_TIMEOUT":2000,"whatever":[1,{"a":null}]})");
  const ReceivedFrame response = client.frame();
  CHECK(response.body.find(R"("msg_timeout":2000)") != std::string::npos);
}

TEST_CASE("nsqd: IDENTIFY body sizes are checked before the body is read",
          "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  {
    WireClient client(nsqd->tcp_port());
    client.write("IDENTIFY\n" + be32(0));
    client.expect_error("E_BAD_BODY IDENTIFY invalid body size 0");
    CHECK(client.closed_within());
  }
  {
    WireClient client(nsqd->tcp_port());
    client.write("IDENTIFY\n" + be32(0x7fffffff));  // no body follows: it must not be awaited
    client.expect_error("E_BAD_BODY IDENTIFY body too big 2147483647 > 5242880");
    CHECK(client.closed_within());
  }
}

TEST_CASE("nsqd: IDENTIFY after SUB and asking for both compressions are refused",
          "[nsq_testing][identify]") {
  auto nsqd = Nsqd::start();
  {
    auto client = consumer(*nsqd, "t", "c", 0);
    client->identify(kNegotiate);
    client->expect_error("E_INVALID cannot IDENTIFY in current state");
    CHECK(client->closed_within());
  }
  {
    WireClient client(nsqd->tcp_port());
    client.identify(R"({"feature_negotiation":true,"snappy":true,"deflate":true})");
    client.expect_error("E_IDENTIFY_FAILED cannot enable both deflate and snappy compression");
    CHECK(client.closed_within());
  }
}

// ---------------------------------------------------------------------------------------------
// Delivery

TEST_CASE("nsqd: a topic's first channel gets what the topic held before it existed",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  publish(*nsqd, "early", "one");
  publish(*nsqd, "early", "two");
  CHECK(nsqd->topic_depth("early") == 2);
  auto client = consumer(*nsqd, "early", "first", 0);
  CHECK(nsqd->topic_depth("early") == 0);
  CHECK(nsqd->channel_depth("early", "first") == 2);
  client->rdy(2);
  CHECK(client->message().body == "one");
  CHECK(client->message().body == "two");
}

TEST_CASE("nsqd: every channel of a topic gets its own copy of each message",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto a = consumer(*nsqd, "fanout", "a", 1);
  auto b = consumer(*nsqd, "fanout", "b", 1);
  publish(*nsqd, "fanout", "hello");
  const ReceivedMessage from_a = a->message();
  const ReceivedMessage from_b = b->message();
  CHECK(from_a.body == "hello");
  CHECK(from_b.body == "hello");
  CHECK(from_a.id == from_b.id);  // nsqd copies the message, id included
}

TEST_CASE("nsqd: a message carries a 16-hex-digit id, attempts 1 and its publish time in ns",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "format", "c", 1);
  const auto before = std::chrono::system_clock::now();
  publish(*nsqd, "format", "payload");
  const ReceivedMessage message = client->message();
  const auto after = std::chrono::system_clock::now();
  CHECK(is_hex_id(message.id));
  CHECK(message.attempts == 1);
  CHECK(message.body == "payload");
  const auto ns = [](auto time) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
  };
  CHECK(message.timestamp_ns >= ns(before));
  CHECK(message.timestamp_ns <= ns(after));
}

TEST_CASE("nsqd: RDY bounds the messages in flight, FIN makes room for the next",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  for (int i = 0; i < 5; ++i) publish(*nsqd, "rdy", "m" + std::to_string(i));
  auto client = consumer(*nsqd, "rdy", "c", 2);
  const ReceivedMessage first = client->message();
  client->message();
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("rdy", "c") == 2; }));
  CHECK(nsqd->channel_depth("rdy", "c") == 3);
  CHECK(client->silent_for(200ms));
  client->fin(first.id);
  CHECK(client->message().body == "m2");
  REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("rdy", "c") == 2; }));
  CHECK(nsqd->in_flight("rdy", "c") == 2);
}

TEST_CASE("nsqd: a channel spreads messages across its clients as their RDY allows",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto a = consumer(*nsqd, "spread", "shared", 1);
  auto b = consumer(*nsqd, "spread", "shared", 1);
  REQUIRE(nsqd->wait_until([&] { return nsqd->subscriber_count("spread", "shared") == 2; }));
  WireClient producer(nsqd->tcp_port());
  producer.mpub("spread", {"x", "y", "z"});
  producer.expect_response("OK");
  std::set<std::string> bodies{a->message().body, b->message().body};
  CHECK(bodies.size() == 2);
  REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("spread", "shared") == 1; }));
  CHECK(nsqd->in_flight("spread", "shared") == 2);
}

TEST_CASE("nsqd: FIN of an unknown id is a non-fatal E_FIN_FAILED", "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "fin", "c", 1);
  client->fin("0123456789abcdef");
  client->expect_error("E_FIN_FAILED FIN 0123456789abcdef failed ID not in flight");
  client->pub("fin", "still connected");
  client->expect_response("OK");
  CHECK(client->message().body == "still connected");
}

TEST_CASE("nsqd: FIN of another client's message fails with 'client does not own message'",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto owner = consumer(*nsqd, "own", "c", 1);
  auto other = consumer(*nsqd, "own", "c", 0);
  publish(*nsqd, "own", "mine");
  const ReceivedMessage message = owner->message();
  other->fin(message.id);
  other->expect_error("E_FIN_FAILED FIN " + message.id + " failed client does not own message");
  owner->fin(message.id);
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("own", "c") == 0; }));
}

TEST_CASE("nsqd: REQ puts a message back and its redelivery counts another attempt",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "req", "c", 1);
  publish(*nsqd, "req", "again");
  const ReceivedMessage first = client->message();
  client->req(first.id, 0);
  const ReceivedMessage second = client->message();
  CHECK(second.id == first.id);
  CHECK(second.attempts == 2);
  CHECK(nsqd->requeue_count("req", "c") == 1);
}

TEST_CASE("nsqd: REQ with a delay defers the message, clamped to max_req_timeout",
          "[nsq_testing][delivery]") {
  NsqdOptions options;
  options.max_req_timeout = 300ms;
  auto nsqd = Nsqd::start(options);
  auto client = consumer(*nsqd, "later", "c", 1);
  publish(*nsqd, "later", "deferred");
  const ReceivedMessage first = client->message();
  client->req(first.id, 3600 * 1000);  // an hour asked, 300 ms given: no error either
  REQUIRE(nsqd->wait_until([&] { return nsqd->deferred("later", "c") == 1; }));
  CHECK(nsqd->channel_depth("later", "c") == 0);
  const ReceivedMessage second = client->message();  // within kBound, so clamped
  CHECK(second.attempts == 2);
}

TEST_CASE("nsqd: a message not finished within msg_timeout is delivered again",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client =
      consumer(*nsqd, "slow", "c", 1, R"({"feature_negotiation":true,"msg_timeout":1000})");
  publish(*nsqd, "slow", "work");
  const ReceivedMessage first = client->message();
  const ReceivedMessage second = client->message();
  CHECK(second.id == first.id);
  CHECK(second.attempts == 2);
  CHECK(nsqd->timeout_count("slow", "c") == 1);
  client->fin(second.id);
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("slow", "c") == 0; }));
}

TEST_CASE("nsqd: TOUCH keeps a message in flight, up to max_msg_timeout",
          "[nsq_testing][delivery]") {
  // Heartbeats every second are the clock: the message times out 1.5 s after delivery unless
  // touched, and each heartbeat answer touches it.
  const std::string identify =
      R"({"feature_negotiation":true,"heartbeat_interval":1000,"msg_timeout":1500})";
  SECTION("touched messages stay in flight") {
    auto nsqd = Nsqd::start();
    auto client = consumer(*nsqd, "touch", "c", 1, identify);
    publish(*nsqd, "touch", "long job");
    const ReceivedMessage message = client->message();
    for (int beat = 0; beat < 3; ++beat) {
      REQUIRE(client->frame().body == kHeartbeatBody);
      client->nop();
      if (beat < 2) client->touch(message.id);
    }
    // About 3 s after delivery: untouched, it would have timed out at 1.5 s.
    CHECK(nsqd->timeout_count("touch", "c") == 0);
    CHECK(nsqd->in_flight("touch", "c") == 1);
  }
  SECTION("but not past max_msg_timeout after delivery") {
    NsqdOptions options;
    options.max_msg_timeout = 2000ms;
    auto nsqd = Nsqd::start(options);
    auto client = consumer(*nsqd, "touch", "c", 1, identify);
    publish(*nsqd, "touch", "too long");
    const ReceivedMessage message = client->message();
    for (int beat = 0; beat < 3; ++beat) {
      ReceivedFrame frame = client->frame();
      if (frame.type == FrameType::error) frame = client->frame();  // a touch too late
      if (frame.type == FrameType::message) break;                  // redelivered
      REQUIRE(frame.body == kHeartbeatBody);
      client->nop();
      client->touch(message.id);
    }
    REQUIRE(nsqd->wait_until([&] { return nsqd->timeout_count("touch", "c") == 1; }));
  }
}

TEST_CASE("nsqd: DPUB holds a message until its delay passes", "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "dpub", "c", 1);
  client->dpub("dpub", 300, "later");
  client->expect_response("OK");
  REQUIRE(nsqd->wait_until([&] { return nsqd->deferred("dpub", "c") == 1; }));
  CHECK(nsqd->channel_depth("dpub", "c") == 0);
  const ReceivedMessage message = client->message();
  CHECK(message.body == "later");
  CHECK(message.attempts == 1);
  CHECK(nsqd->deferred("dpub", "c") == 0);
}

TEST_CASE("nsqd: DPUB beyond max_req_timeout is a fatal E_INVALID", "[nsq_testing][delivery]") {
  NsqdOptions options;
  options.max_req_timeout = 1000ms;
  auto nsqd = Nsqd::start(options);
  WireClient client(nsqd->tcp_port());
  client.dpub("t", 1001, "x");
  client.expect_error("E_INVALID DPUB timeout 1001 out of range 0-1000");
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: CLS answers CLOSE_WAIT and stops deliveries, FIN still works",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "cls", "c", 5);
  publish(*nsqd, "cls", "one");
  const ReceivedMessage message = client->message();
  client->cls();
  client->expect_response("CLOSE_WAIT");
  publish(*nsqd, "cls", "two");
  client->rdy(5);  // ignored after CLS
  client->fin(message.id);
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("cls", "c") == 0; }));
  CHECK(nsqd->channel_depth("cls", "c") == 1);
  CHECK(client->silent_for(200ms));
}

TEST_CASE("nsqd: MPUB stores every message of the batch", "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.mpub("batch", {"a", "b", "c"});
  client.expect_response("OK");
  CHECK(nsqd->topic_depth("batch") == 3);
}

TEST_CASE("nsqd: a client that goes away leaves its messages in flight until they time out",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto client =
      consumer(*nsqd, "gone", "c", 1, R"({"feature_negotiation":true,"msg_timeout":1000})");
  publish(*nsqd, "gone", "orphan");
  client->message();
  client->close();
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 0; }));
  CHECK(nsqd->in_flight("gone", "c") == 1);
  REQUIRE(nsqd->wait_until([&] { return nsqd->channel_depth("gone", "c") == 1; }));
  CHECK(nsqd->timeout_count("gone", "c") == 1);
}

TEST_CASE("nsqd: an ephemeral channel goes with its last client, an ephemeral topic with it",
          "[nsq_testing][delivery]") {
  auto nsqd = Nsqd::start();
  auto durable = consumer(*nsqd, "events", "audit#ephemeral", 0);
  auto second = consumer(*nsqd, "events", "audit#ephemeral", 0);
  auto ephemeral_topic = consumer(*nsqd, "scratch#ephemeral", "c#ephemeral", 0);
  durable->close();
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 2; }));
  CHECK(nsqd->has_channel("events", "audit#ephemeral"));
  second->close();
  ephemeral_topic->close();
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 0; }));
  CHECK_FALSE(nsqd->has_channel("events", "audit#ephemeral"));
  CHECK(nsqd->has_topic("events"));
  CHECK_FALSE(nsqd->has_topic("scratch#ephemeral"));
}

// ---------------------------------------------------------------------------------------------
// Errors nsqd sends

TEST_CASE("nsqd: bad topic and channel names are E_BAD_TOPIC and E_BAD_CHANNEL with nsqd's text",
          "[nsq_testing][errors]") {
  auto nsqd = Nsqd::start();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"SUB bad! c\n", R"(E_BAD_TOPIC SUB topic name "bad!" is not valid)"},
      {"SUB t c\x01\n", R"(E_BAD_CHANNEL SUB channel name "c\x01" is not valid)"},
      {"PUB " + std::string(65, 'a') + "\n",
       "E_BAD_TOPIC PUB topic name \"" + std::string(65, 'a') + "\" is not valid"},
      {"MPUB a:b\n", R"(E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "a:b" is not valid)"},
      {"DPUB #ephemeral 10\n", R"(E_BAD_TOPIC DPUB topic name "#ephemeral" is not valid)"},
  };
  for (const auto& [command, error] : cases) {
    INFO(command);
    WireClient client(nsqd->tcp_port());
    client.identify(kNegotiate);
    client.frame();
    client.write(command);
    client.expect_error(error);
    CHECK(client.closed_within());
  }
}

TEST_CASE("nsqd: commands out of place or malformed are fatal E_INVALID with nsqd's text",
          "[nsq_testing][errors]") {
  auto nsqd = Nsqd::start();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"HELLO\n", "E_INVALID invalid command HELLO"},
      {"\n", "E_INVALID invalid command "},
      {"pub t\n", "E_INVALID invalid command pub"},
      {"RDY 1\n", "E_INVALID cannot RDY in current state"},
      {"FIN 0123456789abcdef\n", "E_INVALID cannot FIN in current state"},
      {"REQ 0123456789abcdef 0\n", "E_INVALID cannot REQ in current state"},
      {"TOUCH 0123456789abcdef\n", "E_INVALID cannot TOUCH in current state"},
      {"CLS\n", "E_INVALID cannot CLS in current state"},
      {"SUB t\n", "E_INVALID SUB insufficient number of parameters"},
      {"PUB\n", "E_INVALID PUB insufficient number of parameters"},
      {"MPUB\n", "E_INVALID MPUB insufficient number of parameters"},
      {"DPUB t\n", "E_INVALID DPUB insufficient number of parameters"},
      {"DPUB t soon\n", "E_INVALID DPUB could not parse timeout soon"},
      {"AUTH x\n", "E_INVALID AUTH invalid number of parameters"},
  };
  for (const auto& [command, error] : cases) {
    INFO(command);
    WireClient client(nsqd->tcp_port());
    client.write(command);
    client.expect_error(error);
    CHECK(client.closed_within());
  }
}

TEST_CASE("nsqd: subscribed-state errors are nsqd's, RDY beyond max_rdy_count is fatal",
          "[nsq_testing][errors]") {
  NsqdOptions options;
  options.max_rdy_count = 100;
  auto nsqd = Nsqd::start(options);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RDY 101\n", "E_INVALID RDY count 101 out of range 0-100"},
      {"RDY many\n", "E_INVALID RDY could not parse count many"},
      {"FIN short\n", "E_INVALID invalid message ID"},
      {"FIN\n", "E_INVALID FIN insufficient number of params"},
      {"REQ 0123456789abcdef\n", "E_INVALID REQ insufficient number of params"},
      {"REQ 0123456789abcdef -1\n", "E_INVALID REQ could not parse timeout -1"},
      {"TOUCH\n", "E_INVALID TOUCH insufficient number of params"},
      {"SUB t c\n", "E_INVALID cannot SUB in current state"},
      {"AUTH\n", "E_INVALID cannot AUTH in current state"},
  };
  for (const auto& [command, error] : cases) {
    INFO(command);
    auto client = consumer(*nsqd, "t", "c", 0);
    client->write(command);
    client->expect_error(error);
    CHECK(client->closed_within());
  }
  // Non-fatal ones keep the connection.
  auto client = consumer(*nsqd, "t", "c", 0);
  client->write("REQ 0123456789abcdef 10\nTOUCH 0123456789abcdef\n");
  client->expect_error("E_REQ_FAILED REQ 0123456789abcdef failed ID not in flight");
  client->expect_error("E_TOUCH_FAILED TOUCH 0123456789abcdef failed ID not in flight");
  client->rdy(100);
  client->pub("t", "alive");
  client->expect_response("OK");
}

TEST_CASE("nsqd: SUB needs heartbeats", "[nsq_testing][errors]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"heartbeat_interval":-1})");
  client.expect_response("OK");
  client.sub("t", "c");
  client.expect_error("E_INVALID cannot SUB with heartbeats disabled");
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: body sizes are judged by nsqd's rules before the body is read",
          "[nsq_testing][errors]") {
  NsqdOptions options;
  options.max_msg_size = 100;
  options.max_body_size = 1000;
  auto nsqd = Nsqd::start(options);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"PUB t\n" + be32(101), "E_BAD_MESSAGE PUB message too big 101 > 100"},
      {"PUB t\n" + be32(0), "E_BAD_MESSAGE PUB invalid message body size 0"},
      {"PUB t\n" + be32(0xffffffff), "E_BAD_MESSAGE PUB invalid message body size -1"},
      {"DPUB t 0\n" + be32(101), "E_BAD_MESSAGE DPUB message too big 101 > 100"},
      {"MPUB t\n" + be32(1001), "E_BAD_BODY MPUB body too big 1001 > 1000"},
      {"MPUB t\n" + be32(0), "E_BAD_BODY MPUB invalid body size 0"},
      {"MPUB t\n" + be32(8) + be32(0) + be32(1), "E_BAD_BODY MPUB invalid message count 0"},
      {"MPUB t\n" + be32(8) + be32(200) + be32(1), "E_BAD_BODY MPUB invalid message count 200"},
      {"MPUB t\n" + be32(13) + be32(1) + be32(101) + "abcde",
       "E_BAD_MESSAGE MPUB message too big 101 > 100"},
      {"MPUB t\n" + be32(13) + be32(2) + be32(1) + "a" + be32(0),
       "E_BAD_MESSAGE MPUB invalid message(1) body size 0"},
      {"AUTH\n" + be32(1001), "E_BAD_BODY AUTH body too big 1001 > 1000"},
  };
  for (const auto& [command, error] : cases) {
    INFO(command);
    WireClient client(nsqd->tcp_port());
    client.write(command);
    client.expect_error(error);
    CHECK(client.closed_within());
  }
}

TEST_CASE("nsqd: AUTH with a shared secret", "[nsq_testing][auth]") {
  NsqdOptions options;
  options.auth_secret = "s3cret";
  options.auth_identity = "tester";
  auto nsqd = Nsqd::start(options);
  SECTION("IDENTIFY reports auth_required") {
    WireClient client(nsqd->tcp_port());
    client.identify(kNegotiate);
    CHECK(client.frame().body.find(R"("auth_required":true)") != std::string::npos);
  }
  SECTION("PUB before AUTH is E_AUTH_FIRST") {
    WireClient client(nsqd->tcp_port());
    client.pub("t", "x");
    client.expect_error("E_AUTH_FIRST AUTH required before PUB");
    CHECK(client.closed_within());
  }
  SECTION("SUB before AUTH is E_AUTH_FIRST") {
    WireClient client(nsqd->tcp_port());
    client.sub("t", "c");
    client.expect_error("E_AUTH_FIRST AUTH required before SUB");
    CHECK(client.closed_within());
  }
  SECTION("a wrong secret is E_AUTH_FAILED") {
    WireClient client(nsqd->tcp_port());
    client.auth("guess");
    client.expect_error("E_AUTH_FAILED AUTH failed");
    CHECK(client.closed_within());
  }
  SECTION("the right secret answers the identity, then everything works") {
    WireClient client(nsqd->tcp_port());
    client.identify(kNegotiate);
    client.frame();
    client.auth("s3cret");
    client.expect_response(R"({"identity":"tester","identity_url":"","permission_count":1})");
    client.pub("t", "x");
    client.expect_response("OK");
    client.auth("s3cret");
    client.expect_error("E_INVALID AUTH already set");
  }
}

TEST_CASE("nsqd: AUTH when auth is off is E_AUTH_DISABLED", "[nsq_testing][auth]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.auth("anything");
  client.expect_error("E_AUTH_DISABLED AUTH disabled");
  CHECK(client.closed_within());
}

TEST_CASE(
    "nsqd: past max_stored_bytes messages go to disk, and past max_disk_bytes a publish fails",
    "[nsq_testing][errors][disk]") {
  NsqdOptions options;
  options.max_stored_bytes = 10;
  options.max_disk_bytes = 100;  // two records of 8 bytes (4 + 26 + 8 each), not three
  auto nsqd = Nsqd::start(options);
  WireClient client(nsqd->tcp_port());
  for (int i = 0; i < 3; ++i) {
    client.pub("t", "12345678");
    client.expect_response("OK");
  }
  CHECK(nsqd->topic_depth("t") == 3);
  CHECK(nsqd->topic_backend_depth("t") == 2);
  CHECK(nsqd->disk_bytes() == 76);
  client.pub("t", "12345678");
  client.expect_error("E_PUB_FAILED PUB failed memory and disk queue limits reached");
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: a subscriber that does not read is held back, and gets the rest once it reads",
          "[nsq_testing][delivery]") {
  // 40 MB against RDY 2500: more than the server queues for one client plus what the kernel
  // buffers on loopback.
  auto nsqd = Nsqd::start();
  auto client = consumer(*nsqd, "flood", "c", 2500);
  const std::string body(200 * 1024, 'f');
  WireClient producer(nsqd->tcp_port());
  for (int i = 0; i < 200; ++i) {
    producer.pub("flood", body);
    producer.expect_response("OK");
  }
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("flood", "c") > 0; }));
  CHECK_FALSE(nsqd->wait_until([&] { return nsqd->channel_depth("flood", "c") == 0; }, 1s));
  for (int i = 0; i < 200; ++i) {
    const ReceivedMessage message = client->message();
    CHECK(message.body.size() == body.size());
    client->fin(message.id);
  }
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("flood", "c") == 0; }));
  CHECK(nsqd->channel_depth("flood", "c") == 0);
}

// ---------------------------------------------------------------------------------------------
// Heartbeats

TEST_CASE("nsqd: heartbeats come at the negotiated interval and NOP keeps the client",
          "[nsq_testing][heartbeat]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"heartbeat_interval":1000})");
  client.expect_response("OK");
  const auto start = std::chrono::steady_clock::now();
  for (int beat = 0; beat < 3; ++beat) {
    const ReceivedFrame frame = client.frame();
    CHECK(frame.type == FrameType::response);
    CHECK(frame.body == kHeartbeatBody);
    client.nop();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 2900ms);
  CHECK(nsqd->client_count() == 1);
}

TEST_CASE("nsqd: a client that misses two heartbeats is disconnected", "[nsq_testing][heartbeat]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"heartbeat_interval":1000})");
  client.expect_response("OK");
  const auto start = std::chrono::steady_clock::now();
  CHECK(client.closed_within());
  CHECK(std::chrono::steady_clock::now() - start >= 1900ms);
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 0; }));
}

// ---------------------------------------------------------------------------------------------
// Compression and TLS

TEST_CASE("nsqd: after IDENTIFY with snappy the stream is snappy both ways",
          "[nsq_testing][compression]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"feature_negotiation":true,"snappy":true})");
  const ReceivedFrame response = client.frame();
  CHECK(response.body.find(R"("snappy":true)") != std::string::npos);
  client.use_codec(make_snappy_codec());
  client.expect_response("OK");  // sent through the compressed stream
  client.sub("zip", "c");
  client.expect_response("OK");
  client.rdy(1);
  const std::string big(100000, 'z');  // several snappy chunks
  client.pub("zip", big);
  client.expect_response("OK");
  CHECK(client.message().body == big);
}

TEST_CASE("nsqd: after IDENTIFY with deflate the stream is deflate at the agreed level",
          "[nsq_testing][compression]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"feature_negotiation":true,"deflate":true,"deflate_level":9})");
  const ReceivedFrame response = client.frame();
  CHECK(response.body.find(R"("deflate":true,"deflate_level":6,"max_deflate_level":6)") !=
        std::string::npos);
  client.use_codec(make_deflate_codec(9));
  client.expect_response("OK");
  client.sub("zip", "c");
  client.expect_response("OK");
  client.rdy(1);
  client.pub("zip", "deflated");
  client.expect_response("OK");
  CHECK(client.message().body == "deflated");
}

TEST_CASE("nsqd: compression can be switched off by the server", "[nsq_testing][compression]") {
  NsqdOptions options;
  options.snappy = false;
  options.deflate = false;
  auto nsqd = Nsqd::start(options);
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"feature_negotiation":true,"snappy":true})");
  CHECK(client.frame().body.find(R"("snappy":false)") != std::string::npos);
  client.pub("t", "plain");
  client.expect_response("OK");
}

TEST_CASE("nsqd: a corrupt compressed stream closes the connection", "[nsq_testing][compression]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"feature_negotiation":true,"snappy":true})");
  client.frame();
  client.use_codec(make_snappy_codec());
  client.expect_response("OK");
  client.write_raw("NOP\n");  // not snappy: no stream identifier
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: tls_v1 upgrades the connection in band, then OK comes over TLS",
          "[nsq_testing][tls]") {
  polybus::test::TestCertificates certs;
  NsqdOptions options;
  options.tls_cert_file = certs.server_cert_file;
  options.tls_key_file = certs.server_key_file;
  auto nsqd = Nsqd::start(options);
  SECTION("TLS alone") {
    WireClient client(nsqd->tcp_port());
    client.identify(R"({"feature_negotiation":true,"tls_v1":true})");
    CHECK(client.frame().body.find(R"("tls_v1":true)") != std::string::npos);
    client.start_tls(certs.ca_file);
    client.expect_response("OK");
    client.pub("secure", "over tls");
    client.expect_response("OK");
    CHECK(nsqd->topic_depth("secure") == 1);
  }
  SECTION("TLS then snappy inside it") {
    WireClient client(nsqd->tcp_port());
    client.identify(R"({"feature_negotiation":true,"tls_v1":true,"snappy":true})");
    client.frame();
    client.start_tls(certs.ca_file);
    client.expect_response("OK");
    client.use_codec(make_snappy_codec());
    client.expect_response("OK");
    client.sub("secure", "c");
    client.expect_response("OK");
    client.rdy(1);
    client.pub("secure", "compressed and encrypted");
    client.expect_response("OK");
    CHECK(client.message().body == "compressed and encrypted");
  }
}

TEST_CASE("nsqd: without a certificate tls_v1 is refused in the response", "[nsq_testing][tls]") {
  auto nsqd = Nsqd::start();
  WireClient client(nsqd->tcp_port());
  client.identify(R"({"feature_negotiation":true,"tls_v1":true})");
  CHECK(client.frame().body.find(R"("tls_v1":false)") != std::string::npos);
  client.pub("t", "plain");
  client.expect_response("OK");
}

// ---------------------------------------------------------------------------------------------
// Stop and resume

TEST_CASE("nsqd: stop drops every client and keeps the messages, resume listens on the same port",
          "[nsq_testing][restart]") {
  auto nsqd = Nsqd::start();
  const std::uint16_t port = nsqd->tcp_port();
  auto client = consumer(*nsqd, "durable", "c", 1);
  for (const char* body : {"a", "b", "c"}) publish(*nsqd, "durable", body);
  const ReceivedMessage in_flight = client->message();
  CHECK(in_flight.body == "a");

  nsqd->stop();
  CHECK_FALSE(nsqd->running());
  CHECK(nsqd->client_count() == 0);
  CHECK(client->closed_within());
  CHECK(nsqd->channel_depth("durable", "c") == 3);  // the in-flight one came back
  CHECK(nsqd->in_flight("durable", "c") == 0);
  asio::io_context io;
  asio::ip::tcp::socket refused(io);
  std::error_code ec;
  refused.connect({asio::ip::make_address_v4("127.0.0.1"), port}, ec);
  CHECK(ec.value() == ECONNREFUSED);

  nsqd->resume();
  CHECK(nsqd->running());
  CHECK(nsqd->tcp_port() == port);
  auto again = consumer(*nsqd, "durable", "c", 3);
  std::multiset<std::string> bodies;
  for (int i = 0; i < 3; ++i) {
    const ReceivedMessage message = again->message();
    bodies.insert(message.body);
    if (message.body == "a") CHECK(message.attempts == 2);  // its first delivery counted
  }
  CHECK(bodies == std::multiset<std::string>{"a", "b", "c"});
}

// ---------------------------------------------------------------------------------------------
// Hostile input

TEST_CASE("nsqd: a command line over the limit closes the connection", "[nsq_testing][hostile]") {
  NsqdOptions options;
  options.max_line_length = 1024;
  auto nsqd = Nsqd::start(options);
  WireClient client(nsqd->tcp_port());
  client.write(std::string(4096, 'A'));  // no newline, ever
  CHECK(client.closed_within());
}

TEST_CASE("nsqd: random bytes never crash the server", "[nsq_testing][hostile]") {
  auto nsqd = Nsqd::start();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> byte(0, 255);
  const std::vector<std::string> prefixes = {
      "",
      "  V2",
      "  V2IDENTIFY\n",
      "  V2PUB t\n",
      "  V2MPUB t\n",
      "  V2IDENTIFY\n" + be32(30) + R"({"feature_negotiation":true,"snappy":true})"};
  for (int round = 0; round < 60; ++round) {
    WireClient client(nsqd->tcp_port(), false);
    std::string garbage = prefixes[static_cast<std::size_t>(round) % prefixes.size()];
    const std::size_t size = std::uniform_int_distribution<std::size_t>(1, 3000)(rng);
    for (std::size_t i = 0; i < size; ++i) garbage.push_back(static_cast<char>(byte(rng)));
    client.write(garbage);
    client.close();
  }
  REQUIRE(nsqd->wait_until([&] { return nsqd->client_count() == 0; }));
  publish(*nsqd, "survivor", "still here");
  CHECK(nsqd->topic_depth("survivor") == 1);
}

// ---------------------------------------------------------------------------------------------
// nsqlookupd

namespace {

struct HttpReply {
  int status = 0;
  std::string headers;
  std::string body;
};

// One request on an open connection; reads exactly one response by its Content-Length.
HttpReply http_get(asio::ip::tcp::socket& socket, const std::string& target,
                   const std::string& extra_headers = "") {
  const std::string request =
      "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
  asio::write(socket, asio::buffer(request));
  asio::streambuf buffer;
  asio::read_until(socket, buffer, "\r\n\r\n");
  std::string data(asio::buffers_begin(buffer.data()), asio::buffers_end(buffer.data()));
  const std::size_t head_end = data.find("\r\n\r\n") + 4;
  HttpReply reply;
  reply.headers = data.substr(0, head_end);
  reply.status = std::stoi(reply.headers.substr(9, 3));
  const std::size_t length_at = reply.headers.find("Content-Length: ");
  REQUIRE(length_at != std::string::npos);
  const std::size_t length = std::stoul(reply.headers.substr(length_at + 16));
  reply.body = data.substr(head_end);
  if (reply.body.size() < length) {
    std::string rest(length - reply.body.size(), '\0');
    asio::read(socket, asio::buffer(rest));
    reply.body += rest;
  }
  return reply;
}

HttpReply http_get(std::uint16_t port, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address_v4("127.0.0.1"), port});
  return http_get(socket, target);
}

}  // namespace

TEST_CASE("lookupd: /lookup answers producers for a known topic and 404 for others",
          "[nsq_testing][lookupd]") {
  auto lookupd = Lookupd::start();
  lookupd->add_producer("orders", "127.0.0.1", 4150, 4151);
  const HttpReply known = http_get(lookupd->http_port(), "/lookup?topic=orders");
  CHECK(known.status == 200);
  CHECK(known.headers.find("Content-Type: application/json; charset=utf-8") != std::string::npos);
  CHECK(known.body ==
        R"({"channels":[],"producers":[{"remote_address":"127.0.0.1:4150","hostname":"127.0.0.1",)"
        R"("broadcast_address":"127.0.0.1","tcp_port":4150,"http_port":4151,"version":"1.3.0"}]})");
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(known.body, producers));
  REQUIRE(producers.size() == 1);
  CHECK(producers[0].tcp_port == 4150);

  const HttpReply unknown = http_get(lookupd->http_port(), "/lookup?topic=nothing");
  CHECK(unknown.status == 404);
  CHECK(unknown.body == R"({"message":"TOPIC_NOT_FOUND"})");
  CHECK(http_get(lookupd->http_port(), "/lookup").body == R"({"message":"MISSING_ARG_TOPIC"})");
  CHECK(http_get(lookupd->http_port(), "/nowhere").status == 404);
  CHECK(lookupd->lookup_count() == 2);

  lookupd->remove_producer("orders", "127.0.0.1", 4150);
  const HttpReply emptied = http_get(lookupd->http_port(), "/lookup?topic=orders");
  CHECK(emptied.status == 200);  // nsqlookupd keeps the topic, with no producer
  CHECK(emptied.body == R"({"channels":[],"producers":[]})");
  lookupd->remove_topic("orders");
  CHECK(http_get(lookupd->http_port(), "/lookup?topic=orders").status == 404);
}

TEST_CASE("lookupd: the wrapped form for old clients", "[nsq_testing][lookupd]") {
  auto lookupd = Lookupd::start();
  lookupd->add_producer("t", "127.0.0.1", 4150);
  lookupd->set_wrapped(true);
  const HttpReply reply = http_get(lookupd->http_port(), "/lookup?topic=t");
  CHECK(reply.body.rfind(R"({"status_code":200,"status_txt":"OK","data":{"channels":[])", 0) == 0);
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(reply.body, producers));
  CHECK(producers.size() == 1);
  const HttpReply missing = http_get(lookupd->http_port(), "/lookup?topic=missing");
  CHECK(parse_lookup_response(missing.body, producers) == errc::lookup_topic_not_found);
}

TEST_CASE("lookupd: /ping, keep-alive and Connection: close", "[nsq_testing][lookupd]") {
  auto lookupd = Lookupd::start();
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address_v4("127.0.0.1"), lookupd->http_port()});
  const HttpReply ping = http_get(socket, "/ping");
  CHECK(ping.status == 200);
  CHECK(ping.body == "OK");
  // Same connection, percent-encoded query.
  lookupd->add_producer("a.b", "127.0.0.1", 1);
  CHECK(http_get(socket, "/lookup?topic=a%2Eb").status == 200);
  const HttpReply last = http_get(socket, "/ping", "Connection: close\r\n");
  CHECK(last.headers.find("Connection: close") != std::string::npos);
  char byte;
  std::error_code ec;
  socket.read_some(asio::buffer(&byte, 1), ec);
  CHECK(ec == asio::error::eof);
}

TEST_CASE(
    "lookupd: a registered nsqd announces its topics and channels, and withdraws while "
    "stopped",
    "[nsq_testing][lookupd]") {
  auto lookupd = Lookupd::start();
  auto nsqd = Nsqd::start();
  publish(*nsqd, "before", "x");
  nsqd->register_with(*lookupd);
  std::vector<LookupProducer> producers;
  REQUIRE_FALSE(parse_lookup_response(http_get(lookupd->http_port(), "/lookup?topic=before").body,
                                      producers));
  REQUIRE(producers.size() == 1);
  CHECK(producers[0].broadcast_address == "127.0.0.1");
  CHECK(producers[0].tcp_port == nsqd->tcp_port());

  auto client = consumer(*nsqd, "after", "workers", 0);
  const HttpReply after = http_get(lookupd->http_port(), "/lookup?topic=after");
  CHECK(after.body.rfind(R"({"channels":["workers"],"producers":[{)", 0) == 0);

  nsqd->stop();
  REQUIRE_FALSE(
      parse_lookup_response(http_get(lookupd->http_port(), "/lookup?topic=after").body, producers));
  CHECK(producers.empty());
  nsqd->resume();
  REQUIRE_FALSE(
      parse_lookup_response(http_get(lookupd->http_port(), "/lookup?topic=after").body, producers));
  CHECK(producers.size() == 1);
}

// ---------------------------------------------------------------------------------------------
// Registration with polybus::testing

TEST_CASE("register_test_brokers adds nsq and nsq+lookupd brokers that serve their URLs",
          "[nsq_testing][registry]") {
  polybus::nsq::testing::register_test_brokers();
  polybus::nsq::testing::register_test_brokers();  // idempotent
  std::set<std::string> names;
  for (const auto& factory : polybus::testing::test_brokers()) {
    names.insert(factory.name);
    if (factory.name != "nsq" && factory.name != "nsq+lookupd") continue;
    auto broker = factory.start();
    const std::string url = broker->url();
    INFO(url);
    CHECK(url.rfind(factory.scheme + "://127.0.0.1:", 0) == 0);
    CHECK(url.find("msg_timeout=1s") != std::string::npos);
    CHECK(url.find("reconnect_initial=10ms") != std::string::npos);
    const std::size_t port_at = url.find(':', factory.scheme.size() + 3) + 1;
    const auto port = static_cast<std::uint16_t>(std::stoi(url.substr(port_at)));
    if (factory.name == "nsq") {
      WireClient client(port);
      client.pub("registered", "x");
      client.expect_response("OK");
    } else {
      CHECK(url.find("lookupd_poll_interval=100ms") != std::string::npos);
      CHECK(http_get(port, "/ping").body == "OK");
    }
    broker->restart();
  }
  CHECK(names.count("nsq") == 1);
  CHECK(names.count("nsq+lookupd") == 1);
}

// ---------------------------------------------------------------------------------------------
// nsqd's disk queues

TEST_CASE("nsqd: beyond mem_queue_size a channel keeps messages on disk and delivers them in order",
          "[nsq_testing][disk]") {
  const std::filesystem::path data =
      std::filesystem::temp_directory_path() / ("polybus-disk-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(data);
  NsqdOptions options;
  options.mem_queue_size = 3;
  options.max_bytes_per_file = 100;  // a few records a file: the queue moves across files
  options.data_path = data.string();
  options.http_port = 0;
  {
    auto nsqd = Nsqd::start(options);
    WireClient consumer(nsqd->tcp_port());
    consumer.sub("t", "c");
    consumer.expect_response("OK");
    WireClient producer(nsqd->tcp_port());
    std::vector<std::string> bodies;
    for (int i = 0; i < 20; ++i) bodies.push_back("message " + std::to_string(i));
    producer.mpub("t", {bodies.begin(), bodies.begin() + 10});
    producer.expect_response("OK");
    for (int i = 10; i < 20; ++i) {
      producer.pub("t", bodies[static_cast<std::size_t>(i)]);
      producer.expect_response("OK");
    }
    CHECK(nsqd->channel_depth("t", "c") == 20);
    CHECK(nsqd->channel_backend_depth("t", "c") == 17);
    // Its files are in a folder of the broker's own under the data path.
    std::size_t files = 0;
    for (const auto& folder : std::filesystem::directory_iterator(data))
      for (const auto& file : std::filesystem::directory_iterator(folder.path()))
        files += file.path().filename().string().rfind("t:c.diskqueue.", 0) == 0;
    CHECK(files > 1);
    const std::string stats =
        http_get(nsqd->http_port(), "/stats?format=json&topic=t&channel=c").body;
    CHECK(stats.find(R"("backend_depth":17)") != std::string::npos);

    consumer.rdy(5);
    for (int i = 0; i < 20; ++i) {
      const ReceivedMessage m = consumer.message();
      CHECK(m.body == bodies[static_cast<std::size_t>(i)]);
      CHECK(m.attempts == 1);
      consumer.fin(m.id);
    }
    REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("t", "c") == 0; }));
    CHECK(nsqd->channel_depth("t", "c") == 0);
    CHECK(nsqd->disk_bytes() == 0);
  }
  // Stopped, the broker leaves nothing behind.
  CHECK(std::filesystem::is_empty(data));
  std::filesystem::remove_all(data);
}

TEST_CASE("nsqd: an ephemeral channel drops what mem_queue_size cannot hold, as nsqd's",
          "[nsq_testing][disk]") {
  NsqdOptions options;
  options.mem_queue_size = 2;
  auto nsqd = Nsqd::start(options);
  WireClient consumer(nsqd->tcp_port());
  consumer.sub("t", "c#ephemeral");
  consumer.expect_response("OK");
  WireClient producer(nsqd->tcp_port());
  producer.mpub("t", {"a", "b", "c", "d"});
  producer.expect_response("OK");
  CHECK(nsqd->channel_depth("t", "c#ephemeral") == 2);
  CHECK(nsqd->channel_backend_depth("t", "c#ephemeral") == 0);
  CHECK(nsqd->disk_bytes() == 0);
}

// ---------------------------------------------------------------------------------------------
// nsqd's fault rules

namespace {

// A consumer subscribed to t/c with RDY `ready`, and `count` messages published to t.
std::unique_ptr<WireClient> consuming(Nsqd& nsqd, int count, std::uint32_t ready) {
  auto consumer = std::make_unique<WireClient>(nsqd.tcp_port());
  consumer->sub("t", "c");
  consumer->expect_response("OK");
  WireClient producer(nsqd.tcp_port());
  for (int i = 0; i < count; ++i) {
    producer.pub("t", "m" + std::to_string(i));
    producer.expect_response("OK");
  }
  consumer->rdy(ready);
  return consumer;
}

}  // namespace

TEST_CASE("nsqd faults: the third FIN is answered E_FIN_FAILED and the others go through",
          "[nsq_testing][faults]") {
  NsqdOptions options;
  options.faults.push_back(
      polybus::testing::parse_fault_rule("unit=FIN,nth=3,error=E_FIN_FAILED FIN failed"));
  auto nsqd = Nsqd::start(options);
  auto consumer = consuming(*nsqd, 4, 1);
  for (int i = 0; i < 4; ++i) {
    const ReceivedMessage m = consumer->message();
    consumer->fin(m.id);
    if (i == 2) {
      consumer->expect_error("E_FIN_FAILED FIN failed");
      consumer->rdy(2);  // the unfinished one holds a slot of RDY 1
    }
  }
  // Not fatal: the connection goes on, and the third message waits in flight for its timeout.
  consumer->nop();
  CHECK(consumer->silent_for(std::chrono::milliseconds(50)));
  REQUIRE(nsqd->wait_until([&] { return nsqd->in_flight("t", "c") == 1; }));
  CHECK(nsqd->faults().fired(1) == 1);
}

TEST_CASE("nsqd faults: swallow, duplicate, close and a fatal error on deliveries and commands",
          "[nsq_testing][faults]") {
  auto nsqd = Nsqd::start();
  SECTION("a swallowed message is in flight but never arrives") {
    nsqd->faults().add(polybus::testing::parse_fault_rule("unit=message,once,swallow"));
    auto consumer = consuming(*nsqd, 2, 5);
    CHECK(consumer->message().body == "m1");
    CHECK(consumer->silent_for(std::chrono::milliseconds(50)));
    CHECK(nsqd->in_flight("t", "c") == 2);
  }
  SECTION("a duplicated message arrives twice, with one id") {
    nsqd->faults().add(polybus::testing::parse_fault_rule("unit=message,nth=2,duplicate"));
    auto consumer = consuming(*nsqd, 2, 5);
    const ReceivedMessage first = consumer->message();
    const ReceivedMessage second = consumer->message();
    const ReceivedMessage again = consumer->message();
    CHECK(first.body == "m0");
    CHECK(second.body == "m1");
    CHECK(again.id == second.id);
    consumer->fin(second.id);
    consumer->fin(again.id);  // the second FIN of one id: nsqd's own answer
    consumer->expect_error("E_FIN_FAILED FIN " + second.id + " failed ID not in flight");
  }
  SECTION("SUB of one topic closes the connection") {
    nsqd->faults().add(polybus::testing::parse_fault_rule("unit=SUB,topic=t,close"));
    WireClient other(nsqd->tcp_port());
    other.sub("u", "c");
    other.expect_response("OK");
    WireClient client(nsqd->tcp_port());
    client.sub("t", "c");
    CHECK(client.closed_within());
    CHECK_FALSE(nsqd->has_channel("t", "c"));
  }
  SECTION("a fatal error closes after it is sent") {
    nsqd->faults().add(
        polybus::testing::parse_fault_rule("unit=PUB,fatal,error=E_PUB_FAILED PUB failed"));
    WireClient client(nsqd->tcp_port());
    client.pub("t", "x");
    client.expect_error("E_PUB_FAILED PUB failed");
    CHECK(client.closed_within());
    CHECK(nsqd->topic_message_count("t") == 0);
  }
}

TEST_CASE("nsqd faults: a delayed answer comes after its delay, in order",
          "[nsq_testing][faults]") {
  auto nsqd = Nsqd::start();
  nsqd->faults().add(polybus::testing::parse_fault_rule("unit=SUB,delay=5000"));
  WireClient client(nsqd->tcp_port());
  client.sub("t", "c");
  client.nop();
  client.pub("t", "x");
  // Carried out at once (the channel exists), answered after the delay.
  REQUIRE(nsqd->wait_until([&] { return nsqd->topic_message_count("t") == 1; }));
  CHECK(client.silent_for(std::chrono::milliseconds(200)));
  client.expect_response("OK");  // SUB's
  client.expect_response("OK");  // PUB's
}

TEST_CASE("nsqd faults: the same seed and traffic duplicate the same messages",
          "[nsq_testing][faults]") {
  const auto duplicated = [] {
    NsqdOptions options;
    options.faults.push_back(
        polybus::testing::parse_fault_rule("unit=message,probability=0.3,seed=7,duplicate"));
    auto nsqd = Nsqd::start(options);
    auto consumer = consuming(*nsqd, 20, 100);
    std::vector<std::string> ids, twice;
    while (ids.size() < 20) {
      const ReceivedMessage m = consumer->message();
      if (!ids.empty() && ids.back() == m.id) {
        twice.push_back(m.body);
      } else {
        ids.push_back(m.id);
      }
    }
    return twice;
  };
  const auto first = duplicated();
  CHECK_FALSE(first.empty());
  CHECK(duplicated() == first);
}
