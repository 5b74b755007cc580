// SPDX-License-Identifier: Apache-2.0
// The NSQ connection's state machine (nsq/src/machine.*), sans I/O: the handshake (IDENTIFY,
// TLS, snappy/deflate, AUTH) and then frames, driven by an operation stream that mixes raw
// server bytes with well-formed frames, handshake answers, compressed streams and client
// commands. Input: byte 0 configures the client (TLS, snappy, deflate, auth secret,
// max_frame_size); then operations (see the switch). Checks: no handler call after on_failure;
// on_ready at most once and only then messages; every message's owner keeps its bytes alive
// after later reads; commands given valid arguments succeed.
#include <deque>

#include "fuzz_util.hpp"
#include "machine.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/nsq/compression.hpp"

using namespace polybus::nsq;
using polybus::fuzz::ByteReader;

namespace {

constexpr std::size_t kMaxFrameSizes[4] = {kDefaultMaxFrameSize, 64, 1024, 65536};
const char* const kErrorCodes[] = {
    "E_INVALID",      "E_BAD_BODY",    "E_FIN_FAILED", "E_REQ_FAILED",
    "E_TOUCH_FAILED", "E_AUTH_FAILED", "E_UNKNOWN",    ""};

struct Handler : MachineHandler {
  Machine* session = nullptr;
  bool failed = false;
  int ready = 0;
  int tls = 0;
  std::string last_id;
  std::deque<std::pair<std::shared_ptr<const void>, std::string_view>> kept;
  std::string sent;  // pushed by the session, not yet "written"

  void alive() { FUZZ_CHECK(!failed); }
  void send(std::string bytes) override {
    FUZZ_CHECK(!bytes.empty());
    sent += bytes;
  }
  void send(std::shared_ptr<const std::string> body) override {
    FUZZ_CHECK(body && !body->empty());
    sent += *body;
  }
  void on_start_tls() override {
    alive();
    ++tls;
    FUZZ_CHECK(session->phase() == Machine::Phase::upgrading_tls);
  }
  void on_ready(const IdentifyResponse&) override {
    alive();
    FUZZ_CHECK(++ready == 1);
    FUZZ_CHECK(session->phase() == Machine::Phase::ready);
  }
  void on_message(const MessageView& m, const std::shared_ptr<const void>& owner) override {
    alive();
    FUZZ_CHECK(ready == 1 && session->phase() == Machine::Phase::ready);
    FUZZ_CHECK(owner != nullptr);
    FUZZ_CHECK(m.id.size() == kMessageIdSize);
    last_id = std::string(m.id);
    kept.emplace_back(owner, m.body);
    if (kept.size() > 16) kept.pop_front();
  }
  void on_response(std::string_view body) override {
    alive();
    polybus::fuzz::touch(body);
  }
  void on_server_error(const ServerError& e) override {
    alive();
    polybus::fuzz::touch(e.description);
  }
  void on_failure(std::error_code ec, const std::string&) override {
    alive();
    FUZZ_CHECK(static_cast<bool>(ec));
    failed = true;
  }
};

void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string frame(FrameType type, std::string_view body) {
  std::string out;
  put32(out, static_cast<std::uint32_t>(body.size() + kFrameTypeSize));
  put32(out, static_cast<std::uint32_t>(type));
  out.append(body);
  return out;
}

std::string printable(std::string_view bytes, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(static_cast<char>(
        '!' + (i < bytes.size() ? static_cast<unsigned char>(bytes[i]) % 94 : i)));
  return out;
}

std::string name(ByteReader& in) {
  static const char* const kNames[] = {"t", "topic", "ch#ephemeral", "a.b-c_d", "", "bad name"};
  std::uint8_t pick = in.u8();
  if (pick < 6) return kNames[pick];
  return std::string(in.bytes(pick % 70));
}

// The server side of the stream: plain, or compressed once the session switched.
struct Server {
  std::unique_ptr<SnappyFrameEncoder> snappy;
  std::unique_ptr<DeflateEncoder> deflate;
  bool compressing() const { return snappy || deflate; }
  void start(bool use_snappy) {
    if (compressing()) return;
    if (use_snappy)
      snappy = std::make_unique<SnappyFrameEncoder>();
    else
      deflate = std::make_unique<DeflateEncoder>(6);
  }
  std::string wire(std::string_view plain) {
    std::string out;
    if (snappy)
      snappy->encode(plain, out);
    else if (deflate)
      FUZZ_CHECK(!deflate->encode(plain, out));
    else
      out = std::string(plain);
    return out;
  }
};

std::string identify_json(ByteReader& in) {
  std::uint8_t f = in.u8();
  if (f == 0xff) return "OK";
  if (f == 0xfe) return std::string(in.short_bytes());
  std::string json = "{\"max_rdy_count\":" + std::to_string(in.u16()) + ",\"version\":\"1.3.0\"";
  if (f & 1) json += ",\"tls_v1\":true";
  if (f & 2) json += ",\"snappy\":true";
  if (f & 4) json += ",\"deflate\":true,\"deflate_level\":" + std::to_string(in.u8() % 12);
  if (f & 8) json += ",\"auth_required\":true";
  if (f & 16) json += ",\"msg_timeout\":" + std::to_string(in.u32());
  json += "}";
  return json;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t config_bits = in.u8();
  MachineConfig config;
  config.identify.client_id = "fuzz";
  config.identify.tls_v1 = config_bits & 1;
  config.identify.snappy = config_bits & 2;
  config.identify.deflate = config_bits & 4;
  if (config_bits & 8) config.auth_secret = "secret";
  config.max_frame_size = kMaxFrameSizes[(config_bits >> 4) & 3];

  Handler handler;
  Machine session(config, handler);
  handler.session = &session;
  session.start();
  Server server;

  auto deliver = [&](std::string bytes) {
    auto owner = std::make_shared<std::string>(std::move(bytes));
    session.receive(owner, *owner);
    if (session.compressed() && !server.compressing()) server.start(session.negotiated().snappy);
  };
  auto send_frame = [&](FrameType type, std::string_view body) {
    deliver(server.wire(frame(type, body)));
  };

  while (!in.empty()) {
    switch (in.u8() % 13) {
      case 0:  // raw bytes, compressed or not
        deliver(std::string(in.bytes(std::size_t{in.u8()} + 1)));
        break;
      case 1: {  // a frame of any type and body
        std::uint8_t type = in.u8() % 4;
        std::string body(in.short_bytes());
        if (type == 3) {
          std::string bad = frame(FrameType::response, body);
          bad[7] = static_cast<char>(in.u8());
          deliver(server.wire(bad));
        } else {
          send_frame(static_cast<FrameType>(type), body);
        }
        break;
      }
      case 2:  // the IDENTIFY answer, alone
        send_frame(FrameType::response, identify_json(in));
        break;
      case 3:
        session.tls_established();
        break;
      case 4:  // OK: after TLS, after the compression switch
        send_frame(FrameType::response, kOkBody);
        break;
      case 5:  // the AUTH answer
        send_frame(FrameType::response,
                   in.flag() ? std::string("{\"identity\":\"x\",\"permission_count\":1}")
                             : std::string(in.short_bytes()));
        break;
      case 6:
        send_frame(FrameType::response, kHeartbeatBody);
        break;
      case 7: {  // a message
        std::string body(8, '\0');
        body[7] = static_cast<char>(in.u8());
        body.push_back(0);
        body.push_back(static_cast<char>(in.u8()));
        body += printable(in.bytes(16), 16);
        body.append(in.short_bytes());
        send_frame(FrameType::message, body);
        break;
      }
      case 8: {  // an error frame
        std::string body = kErrorCodes[in.u8() % 8];
        if (in.flag()) body += " " + std::string(in.short_bytes());
        send_frame(FrameType::error, body);
        break;
      }
      case 9: {
        // IDENTIFY's answer and, in the same read, the compressed OK that follows it.
        if (server.compressing()) break;
        const bool use_snappy = in.flag();
        std::string json =
            use_snappy ? "{\"snappy\":true}" : "{\"deflate\":true,\"deflate_level\":3}";
        std::string bytes = frame(FrameType::response, json);
        Server next;
        next.start(use_snappy);
        bytes += next.wire(frame(FrameType::response, kOkBody));
        std::uint8_t extra = in.u8();
        if (extra & 1) bytes += next.wire(frame(FrameType::response, kHeartbeatBody));
        auto owner = std::make_shared<std::string>(std::move(bytes));
        session.receive(owner, *owner);
        if (session.compressed()) server = std::move(next);
        break;
      }
      case 10: {  // client commands
        const bool ok_state = !handler.failed;
        std::uint8_t which = in.u8() % 8;
        if (which == 0) {
          std::string topic = name(in), channel = name(in);
          auto ec = session.subscribe(topic, channel);
          FUZZ_CHECK(static_cast<bool>(ec) !=
                     (valid_topic_name(topic) && valid_channel_name(channel)));
        } else if (which == 1) {
          session.ready_count(in.u32());
        } else if (which <= 4) {
          std::string id = in.flag() && !handler.last_id.empty()
                               ? handler.last_id
                               : std::string(in.bytes(in.u8() % 20));
          bool valid = id.size() == kMessageIdSize;
          for (char c : id) valid = valid && c > ' ' && c <= '~';
          std::error_code ec = which == 2   ? session.finish(id)
                               : which == 3 ? session.requeue(id, in.u32())
                                            : session.touch(id);
          FUZZ_CHECK(static_cast<bool>(ec) != valid);
        } else if (which == 5) {
          session.close_wait();
        } else if (which == 6) {
          std::string topic = name(in);
          const Machine::Body body(std::string(in.short_bytes()));
          auto ec = session.publish(topic, body, in.flag() ? in.u32() : 0);
          FUZZ_CHECK(static_cast<bool>(ec) != (valid_topic_name(topic) && !body.empty()));
        } else {
          std::string topic = name(in);
          std::vector<Machine::Body> bodies;
          for (std::uint8_t n = in.u8() % 5; n > 0; --n)
            bodies.emplace_back(std::string(in.short_bytes()));
          bool valid = valid_topic_name(topic) && !bodies.empty();
          for (const auto& b : bodies) valid = valid && !b.empty();
          FUZZ_CHECK(static_cast<bool>(session.publish_batch(topic, bodies)) != valid);
        }
        (void)ok_state;
        break;
      }
      case 11:  // the socket wrote what the session sent
        polybus::fuzz::touch(handler.sent);
        handler.sent.clear();
        break;
      case 12:  // everything left, in one read
        deliver(std::string(in.rest()));
        break;
    }
    // Messages stay readable as long as their owners are held.
    for (auto& [owner, body] : handler.kept) polybus::fuzz::touch(body);
  }
  polybus::fuzz::touch(handler.sent);
  return 0;
}
