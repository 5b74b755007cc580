// SPDX-License-Identifier: Apache-2.0
// The NSQ session state machine driven byte by byte, with no socket: handshake, upgrades,
// heartbeats, frames, and hostile input.
#include <catch2/catch.hpp>

#include "nsq/src/machine.hpp"
#include "polybus/error.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/nsq/compression.hpp"

using namespace polybus::nsq;

namespace {

std::string frame(FrameType type, std::string_view body) {
  std::string out;
  auto put32 = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put32(static_cast<std::uint32_t>(body.size() + 4));
  put32(static_cast<std::uint32_t>(type));
  out.append(body);
  return out;
}

std::string message_body(std::uint16_t attempts, std::string_view id, std::string_view payload) {
  std::string out(8, '\0');
  out[7] = 1;  // timestamp 1
  out.push_back(static_cast<char>(attempts >> 8));
  out.push_back(static_cast<char>(attempts & 0xff));
  out.append(id);
  out.append(payload);
  return out;
}

struct Recorder : MachineHandler {
  // What the session sent, piece by piece: owned bytes, or a body it shares.
  std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> sent;
  int tls = 0, ready = 0;
  void send(std::string bytes) override { sent.emplace_back(std::move(bytes), nullptr); }
  void send(std::shared_ptr<const std::string> body) override { sent.emplace_back("", body); }
  bool nop_unsent = false;  // the owner's socket has not taken the last NOP yet
  int nops = 0;
  bool heartbeat_answer_unsent() const override { return nop_unsent; }
  void sent_heartbeat_answer() override { ++nops; }
  std::vector<std::string> messages, responses, server_errors;
  std::error_code failure;
  std::string failure_detail;
  void on_start_tls() override { ++tls; }
  void on_ready(const IdentifyResponse&) override { ++ready; }
  void on_message(const MessageView& m, const std::shared_ptr<const void>& owner) override {
    CHECK(owner != nullptr);
    messages.emplace_back(m.body);
  }
  void on_response(std::string_view body) override { responses.emplace_back(body); }
  void on_server_error(const ServerError& e) override { server_errors.emplace_back(e.code_text); }
  void on_failure(std::error_code ec, const std::string& detail) override {
    failure = ec;
    failure_detail = detail;
  }
};

// What the session sent since the last call, as one byte string.
std::string drain(Recorder& recorder) {
  std::string out;
  for (auto& [bytes, shared] : recorder.sent) out += shared ? *shared : bytes;
  recorder.sent.clear();
  return out;
}

// Feeds the bytes one at a time, the hardest split.
void feed_bytewise(Machine& session, const std::string& bytes) {
  auto owner = std::make_shared<std::string>(bytes);
  for (std::size_t i = 0; i < owner->size(); ++i)
    session.receive(owner, std::string_view(owner->data() + i, 1));
}

MachineConfig config() {
  MachineConfig c;
  c.identify.client_id = "test";
  c.identify.heartbeat_interval = 1000;
  return c;
}

const std::string kId = "0123456789abcdef";

}  // namespace

TEST_CASE("the session opens with the magic and IDENTIFY and is ready after OK", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  auto out = drain(r);
  CHECK(out.rfind("  V2IDENTIFY\n", 0) == 0);
  CHECK(out.find("\"client_id\":\"test\"") != std::string::npos);
  CHECK(out.find("\"feature_negotiation\":true") != std::string::npos);
  feed_bytewise(s, frame(FrameType::response, R"({"max_rdy_count":100,"version":"1.3.0"})"));
  CHECK(r.ready == 1);
  CHECK(s.phase() == Machine::Phase::ready);
  CHECK(s.negotiated().max_rdy_count == 100);
}

TEST_CASE("a plain OK to IDENTIFY is accepted with nsqd's defaults", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  CHECK(r.ready == 1);
  CHECK(s.negotiated().max_rdy_count == 2500);
}

TEST_CASE("heartbeats are answered with NOP in every phase after IDENTIFY", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  drain(r);
  s.receive(nullptr, frame(FrameType::response, "OK"));
  feed_bytewise(s, frame(FrameType::response, "_heartbeat_"));
  CHECK(drain(r) == "NOP\n");
  CHECK(r.responses.empty());
}

TEST_CASE("messages split over reads arrive whole, with id and attempts", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  std::string wire = frame(FrameType::message, message_body(3, kId, "hello")) +
                     frame(FrameType::message, message_body(1, kId, "world"));
  feed_bytewise(s, wire);
  REQUIRE(r.messages == std::vector<std::string>{"hello", "world"});
  auto whole = std::make_shared<std::string>(wire);
  s.receive(whole, *whole);
  CHECK(r.messages.size() == 4);
}

TEST_CASE("TLS agreed in IDENTIFY asks the owner to upgrade, then waits for OK", "[nsq][machine]") {
  Recorder r;
  auto c = config();
  c.identify.tls_v1 = true;
  Machine s(c, r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, R"({"tls_v1":true})"));
  CHECK(r.tls == 1);
  CHECK(r.ready == 0);
  s.tls_established();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  CHECK(r.ready == 1);
}

TEST_CASE("TLS requested but refused by nsqd fails the handshake", "[nsq][machine]") {
  Recorder r;
  auto c = config();
  c.identify.tls_v1 = true;
  Machine s(c, r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, R"({"tls_v1":false})"));
  CHECK(r.failure == polybus::errc::tls_error);
}

TEST_CASE("snappy agreed in IDENTIFY switches both directions, even mid-read", "[nsq][machine]") {
  Recorder r;
  auto c = config();
  c.identify.snappy = true;
  Machine s(c, r);
  s.start();
  drain(r);
  // nsqd's side: the response in plain text, then everything compressed.
  auto server = make_snappy_codec();
  std::string compressed;
  REQUIRE_FALSE(server->encode(
      frame(FrameType::response, "OK") + frame(FrameType::message, message_body(1, kId, "zipped")),
      compressed));
  std::string wire = frame(FrameType::response, R"({"snappy":true})") + compressed;
  s.receive(nullptr, wire);  // one read holding both the switch and compressed bytes
  CHECK(r.ready == 1);
  REQUIRE(r.messages == std::vector<std::string>{"zipped"});
  REQUIRE(s.compressed());
  REQUIRE_FALSE(s.finish(kId));
  std::string decoded;
  REQUIRE_FALSE(server->decode(drain(r), decoded));
  CHECK(decoded == "FIN " + kId + "\n");
}

TEST_CASE("AUTH is sent when nsqd requires it and the session is ready after its answer",
          "[nsq][machine]") {
  Recorder r;
  auto c = config();
  c.auth_secret = "s3cret";
  Machine s(c, r);
  s.start();
  drain(r);
  s.receive(nullptr, frame(FrameType::response, R"({"auth_required":true})"));
  auto out = drain(r);
  CHECK(out.rfind("AUTH\n", 0) == 0);
  CHECK(out.find("s3cret") != std::string::npos);
  s.receive(nullptr, frame(FrameType::response, R"({"identity":"me","permission_count":1})"));
  CHECK(r.ready == 1);
}

TEST_CASE("AUTH required without a secret fails with E_AUTH_FIRST", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, R"({"auth_required":true})"));
  CHECK(r.failure == errc::e_auth_first);
}

TEST_CASE("non-fatal errors keep the session, fatal ones end it", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  s.receive(nullptr, frame(FrameType::error, "E_FIN_FAILED FIN 0123 failed"));
  CHECK_FALSE(r.failure);
  CHECK(s.phase() == Machine::Phase::ready);
  s.receive(nullptr, frame(FrameType::error, "E_BAD_TOPIC PUB topic name invalid"));
  CHECK(r.failure == errc::e_bad_topic);
  CHECK(r.server_errors == std::vector<std::string>{"E_FIN_FAILED", "E_BAD_TOPIC"});
}

TEST_CASE("hostile input ends the session with a clear error, never a crash", "[nsq][machine]") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"negative size", std::string("\xff\xff\xff\xff\0\0\0\0", 8)},
      {"huge size", std::string("\x7f\xff\xff\xff\0\0\0\0", 8)},
      {"size below the type", std::string("\0\0\0\x02\0\0", 6)},
      {"unknown frame type", frame(static_cast<FrameType>(7), "x")},
      {"message shorter than its header", frame(FrameType::message, "short")},
      {"message before the handshake", frame(FrameType::message, message_body(1, kId, "x"))},
      {"invalid IDENTIFY JSON", frame(FrameType::response, "{not json")},
  };
  for (const auto& [name, wire] : cases) {
    INFO(name);
    Recorder r;
    Machine s(config(), r);
    s.start();
    if (name != "message before the handshake" && name != "invalid IDENTIFY JSON")
      s.receive(nullptr, frame(FrameType::response, "OK"));
    feed_bytewise(s, wire);
    CHECK(r.failure);
    CHECK_FALSE(r.failure_detail.empty());
    CHECK(s.phase() == Machine::Phase::failed);
    s.receive(nullptr, frame(FrameType::response, "OK"));  // ignored after a failure
  }
}

TEST_CASE("a large body is written from the kept bytes, a small one is copied", "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  drain(r);
  const Machine::Body large(std::string(polybus::KeptPayload::kSharedAbove + 1, 'L'));
  REQUIRE(large.shared());
  REQUIRE_FALSE(s.publish("t", large));
  REQUIRE(r.sent.size() == 2);
  CHECK(r.sent[0].first == std::string("PUB t\n\0\0\x04\x01", 10));
  CHECK(r.sent[1].second == large.shared());  // the same buffer, shared
  r.sent.clear();

  const Machine::Body small(std::string(polybus::KeptPayload::kSharedAbove, 's'));
  REQUIRE_FALSE(small.shared());
  REQUIRE_FALSE(s.publish_batch("t", {small, large}));
  std::string wire;
  for (const auto& [bytes, shared] : r.sent) {
    if (shared) CHECK(shared == large.shared());  // only the large one is shared
    wire += shared ? *shared : bytes;
  }
  const std::string sizes = std::string("\0\0\x08\x0d", 4) + std::string("\0\0\0\x02", 4);
  CHECK(wire == "MPUB t\n" + sizes + std::string("\0\0\x04\0", 4) + std::string(1024, 's') +
                    std::string("\0\0\x04\x01", 4) + std::string(1025, 'L'));

  CHECK(s.publish("bad topic!", Machine::Body("x")) == errc::invalid_name);
  CHECK(s.publish("t", Machine::Body()) == errc::empty_body);
}

TEST_CASE("heartbeats wait while the last NOP is unsent: one pending answer at a time",
          "[nsq][machine]") {
  Recorder r;
  Machine s(config(), r);
  s.start();
  s.receive(nullptr, frame(FrameType::response, "OK"));
  drain(r);
  const std::string three = frame(FrameType::response, "_heartbeat_") +
                            frame(FrameType::response, "_heartbeat_") +
                            frame(FrameType::response, "_heartbeat_");
  s.receive(nullptr, three);
  CHECK(drain(r) == "NOP\n");  // three in one read: one answer
  r.nop_unsent = true;
  s.receive(nullptr, three);
  feed_bytewise(s, three);
  CHECK(drain(r).empty());  // the pending NOP answers them
  r.nop_unsent = false;
  s.receive(nullptr, frame(FrameType::response, "_heartbeat_"));
  CHECK(drain(r) == "NOP\n");
  CHECK(r.nops == 2);
}
