// Figg's client state machine without a socket: the publish window, cumulative ACKs, offsets,
// detach, and the resend order after a reconnect.
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>

#include "client_protocol.hpp"
#include "operations.hpp"
#include "polybus/error.hpp"

using namespace polybus;
using namespace polybus::figg;

namespace {

struct Recorder : ProtocolHandler {
  std::vector<std::pair<std::string, std::uint64_t>> data;
  std::vector<std::string> attached;
  std::error_code failure;
  void on_data(const std::string& topic, std::uint64_t offset, std::string_view,
               const std::shared_ptr<const void>&) override {
    data.emplace_back(topic, offset);
  }
  void on_attached(const std::string& topic, std::uint64_t) override { attached.push_back(topic); }
  void on_pong(std::uint64_t) override {}
  void on_failure(std::error_code ec, const std::string&) override { failure = ec; }
};

// Completions with a recorded result; deadlines far away.
struct Completions {
  std::shared_ptr<std::vector<std::pair<int, std::error_code>>> results =
      std::make_shared<std::vector<std::pair<int, std::error_code>>>();
  OpCompletion make(int id) {
    auto op = std::make_shared<detail::Operation>();
    op->deadline = Clock::now() + std::chrono::hours(1);
    auto results_ = results;
    op->fn = [results_, id](std::error_code ec, std::string, std::string) { results_->emplace_back(id, ec); };
    return OpCompletion(op);
  }
};

// Decodes the protocol's output into "TYPE:topic:value" lines.
std::vector<std::string> decode(ClientProtocol& p) {
  std::string wire;
  for (auto& piece : p.output()) wire += piece.shared ? *piece.shared : piece.bytes;
  p.output().clear();
  std::vector<std::string> lines;
  FrameParser parser(1 << 20);
  std::string_view in = wire;
  while (!in.empty()) {
    Frame f;
    auto r = parser.feed(in, f);
    REQUIRE_FALSE(r.error);
    in.remove_prefix(r.consumed);
    if (!r.has_frame) continue;
    if (f.type == MessageType::attach) {
      Attach a;
      REQUIRE_FALSE(parse_attach(f.payload, a));
      lines.push_back("ATTACH:" + std::string(a.topic) + ":" + (a.from_offset ? std::to_string(a.offset) : "latest"));
    } else if (f.type == MessageType::detach) {
      std::string_view t;
      REQUIRE_FALSE(parse_topic(f.payload, t));
      lines.push_back("DETACH:" + std::string(t));
    } else if (f.type == MessageType::publish) {
      Publish pub;
      REQUIRE_FALSE(parse_publish(f.payload, pub));
      lines.push_back("PUBLISH:" + std::string(pub.topic) + ":" + std::to_string(pub.seq));
    }
  }
  return lines;
}

std::string frame_ack(std::uint64_t seq) {
  std::string s;
  append_ack(s, seq);
  return s;
}
std::string frame_data(const std::string& topic, std::uint64_t offset, const std::string& body) {
  std::string s;
  append_data_header(s, topic, offset, body.size());
  return s + body;
}
std::string frame_attached(const std::string& topic, std::uint64_t offset) {
  std::string s;
  append_attached(s, topic, offset);
  return s;
}
std::shared_ptr<const std::string> payload(const char* text) { return std::make_shared<const std::string>(text); }

}  // namespace

TEST_CASE("the window fills, and an ACK releases its message and every earlier one", "[figg][protocol]") {
  Recorder r;
  Completions c;
  ClientProtocol p(3, 1 << 20, r);
  p.connected();
  for (int i = 1; i <= 3; ++i) p.publish("t", payload("x"), c.make(i));
  CHECK(p.window_full());
  p.receive(nullptr, frame_ack(2));
  CHECK(c.results->size() == 2);
  CHECK(p.unacked() == 1);
  CHECK_FALSE(p.window_full());
  p.receive(nullptr, frame_ack(3));
  CHECK(c.results->size() == 3);
  for (auto& [id, ec] : *c.results) CHECK_FALSE(ec);
}

TEST_CASE("after a reconnect the resend follows the document's order", "[figg][protocol]") {
  Recorder r;
  Completions c;
  ClientProtocol p(16, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("attached", std::nullopt));
  REQUIRE_FALSE(p.attach("leaving", std::nullopt));
  p.receive(nullptr, frame_attached("attached", 0) + frame_attached("leaving", 0));
  p.receive(nullptr, frame_data("attached", 11, "bb"));
  p.publish("out", payload("1"), c.make(1));
  p.publish("out", payload("2"), c.make(2));
  p.detach("leaving");
  decode(p);
  p.disconnected();
  REQUIRE_FALSE(p.attach("pending", 5));  // while disconnected: waits for the connection
  p.connected();
  CHECK(decode(p) == std::vector<std::string>{"ATTACH:pending:5", "ATTACH:attached:11",
                                              "DETACH:leaving", "PUBLISH:out:1", "PUBLISH:out:2"});
}

TEST_CASE("an attachment resumes from ATTACHED's offset until DATA moves it", "[figg][protocol]") {
  Recorder r;
  ClientProtocol p(4, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("t", std::nullopt));
  p.receive(nullptr, frame_attached("t", 18));
  CHECK(p.offset("t") == 18u);
  p.receive(nullptr, frame_data("t", 25, "abc"));
  CHECK(p.offset("t") == 25u);
  CHECK(r.data.size() == 1);
}

TEST_CASE("DATA for a detached topic is dropped; a second attach is refused", "[figg][protocol]") {
  Recorder r;
  ClientProtocol p(4, 1 << 20, r);
  p.connected();
  REQUIRE_FALSE(p.attach("t", std::nullopt));
  CHECK(p.attach("t", std::nullopt) == polybus::errc::already_subscribed);
  p.receive(nullptr, frame_attached("t", 0));
  p.detach("t");
  p.receive(nullptr, frame_data("t", 5, "a"));  // the real server keeps sending
  CHECK(r.data.empty());
  CHECK_FALSE(p.attach("t", 5));  // may attach again after detaching
}

TEST_CASE("a malformed message from the server is a failure, not a crash", "[figg][protocol]") {
  Recorder r;
  ClientProtocol p(4, 1 << 20, r);
  p.connected();
  std::string bad("\x00\x07\x00\x01\x00\x00\x00\x03" "abc", 11);  // DATA with a 3-byte payload
  p.receive(nullptr, bad);
  CHECK(r.failure == figg::errc::truncated_field);
  Recorder r2;
  ClientProtocol big(4, 16, r2);
  big.connected();
  big.receive(nullptr, frame_data("t", 1, std::string(100, 'x')));
  CHECK(r2.failure == figg::errc::frame_too_large);
}

TEST_CASE("close fails every unacknowledged publish exactly once", "[figg][protocol]") {
  Recorder r;
  Completions c;
  ClientProtocol p(8, 1 << 20, r);
  for (int i = 0; i < 5; ++i) p.publish("t", payload("x"), c.make(i));
  p.fail_all(make_error_code(polybus::errc::closed), "closed");
  p.fail_all(make_error_code(polybus::errc::closed), "closed");
  REQUIRE(c.results->size() == 5);
  for (auto& [id, ec] : *c.results) CHECK(ec == polybus::errc::closed);
}
