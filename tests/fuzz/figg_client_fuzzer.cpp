// SPDX-License-Identifier: Apache-2.0
// Figg's client state machine (figg/src/machine.*), sans I/O: publishes through the window,
// attach/detach, connects and disconnects, and server frames (well-formed ACK, DATA, ATTACHED,
// DETACHED, PONG and unknown types, or raw bytes) from an operation stream. Input: byte 0 the
// window, byte 1 max_payload's choice, then operations (see the switch). Checks: no publish is
// acknowledged that was not published, none twice (the rest are abandoned at the end); the
// window is never over its size; nothing is sent while disconnected; every frame sent parses;
// data owners keep their bytes.
#include <deque>
#include <set>

#include "fuzz_util.hpp"
#include "machine.hpp"
#include "polybus/error.hpp"
#include "polybus/figg/codec.hpp"

using namespace polybus;
using namespace polybus::figg;
using polybus::fuzz::ByteReader;

namespace {

constexpr std::size_t kMaxPayloads[4] = {16 << 20, 64, 1024, 65536};
const std::string kTopics[] = {"a", "b", "topic", std::string(1024, 't')};

struct Handler : MachineHandler {
  const Machine* machine = nullptr;
  std::string wire;             // sent since the last check_output
  std::uint64_t published = 0;  // publishes given to the machine
  std::uint64_t acked = 0;
  std::deque<std::pair<std::shared_ptr<const void>, std::string_view>> kept;
  int failures = 0;
  void send(std::string bytes) override {
    FUZZ_CHECK(machine && machine->is_connected());
    wire += bytes;
  }
  void send(std::shared_ptr<const std::string> payload) override {
    FUZZ_CHECK(machine && machine->is_connected() && payload);
    wire += *payload;
  }
  void on_acked(std::size_t count) override {
    FUZZ_CHECK(count > 0);
    acked += count;
    FUZZ_CHECK(acked <= published);
  }
  void on_data(const std::string& topic, std::uint64_t, std::string_view data,
               const std::shared_ptr<const void>& owner) override {
    FUZZ_CHECK(!topic.empty());
    FUZZ_CHECK(owner != nullptr);
    kept.emplace_back(owner, data);
    if (kept.size() > 16) kept.pop_front();
  }
  void on_attached(const std::string& topic, std::uint64_t) override { FUZZ_CHECK(!topic.empty()); }
  void on_log_reset(const std::string& topic, std::uint64_t resume_from,
                    std::uint64_t log_end) override {
    FUZZ_CHECK(!topic.empty() && log_end < resume_from);
  }
  void on_pong(std::uint64_t) override {}
  void on_failure(std::error_code ec, const std::string&) override {
    FUZZ_CHECK(static_cast<bool>(ec));
    ++failures;
  }
};

// Every frame the client writes must be one the server can parse.
void check_output(Handler& handler, std::size_t max_payload) {
  std::string wire = std::move(handler.wire);
  handler.wire.clear();
  FrameParser parser(max_payload > (16 << 20) ? max_payload : (16 << 20) + 2048);
  std::string_view in = wire;
  while (!in.empty()) {
    Frame f;
    auto r = parser.feed(in, f);
    FUZZ_CHECK(!r.error);
    in.remove_prefix(r.consumed);
    if (!r.has_frame) continue;
    FUZZ_CHECK(f.version == kProtocolVersion);
    switch (f.type) {
      case MessageType::attach: {
        Attach a;
        FUZZ_CHECK(!parse_attach(f.payload, a));
        break;
      }
      case MessageType::detach: {
        std::string_view t;
        FUZZ_CHECK(!parse_topic(f.payload, t));
        break;
      }
      case MessageType::publish: {
        Publish pub;
        FUZZ_CHECK(!parse_publish(f.payload, pub));
        break;
      }
      case MessageType::ping: {
        std::uint64_t v;
        FUZZ_CHECK(!parse_u64(f.payload, v));
        break;
      }
      default:
        FUZZ_CHECK(false && "the client wrote a server message type");
    }
  }
  FUZZ_CHECK(in.empty());
}

std::string server_frame(ByteReader& in, std::uint64_t next_seq) {
  std::string out;
  const std::string& topic = kTopics[in.u8() % 4];
  switch (in.u8() % 7) {
    case 0: {
      // ACK near the sequence numbers in use, or anything.
      std::uint8_t back = in.u8();
      append_ack(out, back == 0xff ? in.u64() : next_seq - 1 - (back % 8));
      break;
    }
    case 1: {
      std::string body(in.short_bytes());
      append_data_header(out, topic, in.u64(), body.size());
      out += body;
      break;
    }
    case 2:
      append_attached(out, topic, in.u64());
      break;
    case 3:
      append_detached(out, topic);
      break;
    case 4:
      append_pong(out, in.u64());
      break;
    case 5: {  // a known type with a payload of any bytes
      std::string body(in.short_bytes());
      out.push_back(0);
      out.push_back(static_cast<char>(in.u8() % 10));
      out += std::string("\0\1", 2);
      std::uint32_t n = static_cast<std::uint32_t>(body.size());
      for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<char>((n >> shift) & 0xff));
      out += body;
      break;
    }
    default:
      out = std::string(in.bytes(std::size_t{in.u8()} + 1));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::size_t window = in.u8() % 9;  // 0 is taken as 1
  const std::size_t max_payload = kMaxPayloads[in.u8() % 4];
  Handler handler;
  {
    Machine protocol(window, max_payload, handler);
    handler.machine = &protocol;
    std::uint64_t next_seq = 1;
    while (!in.empty()) {
      switch (in.u8() % 10) {
        case 0:
          protocol.connected();
          break;
        case 1:
          protocol.disconnected();
          break;
        case 2:
          if (!protocol.window_full()) {
            protocol.publish(std::string(kTopics[in.u8() % 4]), std::string(in.short_bytes()));
            ++handler.published;
            ++next_seq;
          }
          break;
        case 3: {
          std::optional<std::uint64_t> from;
          if (in.flag()) from = in.u64();
          protocol.attach(kTopics[in.u8() % 4], from);
          break;
        }
        case 4:
          protocol.detach(kTopics[in.u8() % 4]);
          break;
        case 5:
          protocol.ping(in.u64());
          break;
        case 6:
        case 7: {
          // One or more server frames in one read, the read split or not.
          std::string bytes;
          for (std::uint8_t n = in.u8() % 4 + 1; n > 0; --n) bytes += server_frame(in, next_seq);
          auto owner = std::make_shared<std::string>(bytes);
          std::size_t cut = in.u8();
          if (cut == 0 || cut >= owner->size()) {
            protocol.receive(owner, *owner);
          } else {
            protocol.receive(owner, std::string_view(*owner).substr(0, cut));
            protocol.receive(owner, std::string_view(*owner).substr(cut));
          }
          break;
        }
        case 8:
          check_output(handler, max_payload);
          break;
        case 9:
          if (in.flag()) {
            handler.published -= protocol.unacked();  // abandoned: never acknowledged now
            protocol.abandon();
          }
          break;
      }
      FUZZ_CHECK(protocol.unacked() <= std::max<std::size_t>(window, 1));
      FUZZ_CHECK(handler.acked + protocol.unacked() == handler.published);
      for (auto& [owner, bytes] : handler.kept) polybus::fuzz::touch(bytes);
    }
    check_output(handler, max_payload);
    protocol.abandon();
    FUZZ_CHECK(protocol.unacked() == 0);
  }
  return 0;
}
