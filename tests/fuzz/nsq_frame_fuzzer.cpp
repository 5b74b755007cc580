// SPDX-License-Identifier: Apache-2.0
// NSQ V2 frames from nsqd: FrameParser, and parse_message / parse_server_error on the frames it
// yields. Input: fuzz_util.hpp's [control][splits][payload]; the control flags pick
// max_frame_size. Checks: frames and the final error are the same whole and split; every frame
// re-encodes to exactly the bytes it came from; consumed never exceeds the input; bodies stay
// within max_frame_size; errors are sticky until reset().
#include "fuzz_util.hpp"
#include "polybus/nsq/codec.hpp"

using namespace polybus::nsq;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxSizes[16] = {
    kDefaultMaxFrameSize, 4, 5, 29, 30, 31, 64, 256, 1024, 4096, 65536, 65540, 1 << 20, 8, 16, 100};

struct Outcome {
  std::string reencoded;  // every frame, encoded again
  std::vector<std::pair<FrameType, std::string>> frames;
  std::error_code error;
  bool idle = true;
};

void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void check_body(const Frame& frame) {
  switch (frame.type) {
    case FrameType::message: {
      MessageView m;
      FUZZ_CHECK(!parse_message(frame.body, m));  // the parser refused short message frames
      FUZZ_CHECK(m.id.size() == kMessageIdSize);
      std::string again;
      std::uint64_t ts = static_cast<std::uint64_t>(m.timestamp_ns);
      put32(again, static_cast<std::uint32_t>(ts >> 32));
      put32(again, static_cast<std::uint32_t>(ts));
      again.push_back(static_cast<char>(m.attempts >> 8));
      again.push_back(static_cast<char>(m.attempts & 0xff));
      again.append(m.id);
      again.append(m.body);
      FUZZ_CHECK(again == frame.body);
      break;
    }
    case FrameType::error: {
      ServerError e = parse_server_error(frame.body);
      std::string again(e.code_text);
      if (frame.body.size() > e.code_text.size()) again += ' ';
      again.append(e.description);
      FUZZ_CHECK(again == frame.body);
      FUZZ_CHECK(e.fatal == is_fatal_server_error(e.code));
      break;
    }
    case FrameType::response:
      FUZZ_CHECK(is_heartbeat(frame) == (frame.body == kHeartbeatBody));
      break;
  }
}

Outcome run(std::size_t max_frame_size, const std::vector<std::string_view>& parts) {
  FrameParser parser(max_frame_size);
  Outcome out;
  for (auto part : parts) {
    std::string_view in = part;
    while (!in.empty()) {
      Frame frame;
      auto r = parser.feed(in, frame);
      FUZZ_CHECK(r.consumed <= in.size());
      FUZZ_CHECK(parser.buffer_capacity() <= parser.max_frame_size());
      if (r.error) {
        FUZZ_CHECK(!r.has_frame);
        FUZZ_CHECK(!parser.idle());
        Frame again;
        auto sticky = parser.feed(in.substr(r.consumed), again);
        FUZZ_CHECK(sticky.error == r.error && sticky.consumed == 0 && !sticky.has_frame);
        out.error = r.error;
        out.idle = false;
        // reset() makes the parser usable again.
        parser.reset();
        std::string ok;
        put32(ok, 6);
        put32(ok, 0);
        ok += "OK";
        Frame after;
        auto fresh = max_frame_size >= 6 ? parser.feed(ok, after) : FrameParser::Result{};
        if (max_frame_size >= 6) FUZZ_CHECK(fresh.has_frame && after.body == "OK");
        return out;
      }
      FUZZ_CHECK(r.consumed > 0 || r.has_frame);
      if (r.has_frame) {
        FUZZ_CHECK(frame.body.size() + kFrameTypeSize <= max_frame_size);
        if (!frame.in_parser_buffer) {
          FUZZ_CHECK(frame.body.data() >= in.data() &&
                     frame.body.data() + frame.body.size() <= in.data() + r.consumed);
        } else {
          FUZZ_CHECK(frame.body.size() <= parser.buffer_capacity());
        }
        FUZZ_CHECK(parser.idle());
        check_body(frame);
        put32(out.reencoded, static_cast<std::uint32_t>(frame.body.size() + kFrameTypeSize));
        put32(out.reencoded, static_cast<std::uint32_t>(frame.type));
        out.reencoded.append(frame.body);
        out.frames.emplace_back(frame.type, std::string(frame.body));
      }
      in.remove_prefix(r.consumed);
    }
  }
  out.idle = parser.idle();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const std::size_t max_frame_size = kMaxSizes[input.flags];
  OwnedChunks whole({input.payload});
  Outcome a = run(max_frame_size, whole.views);
  OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
  Outcome b = run(max_frame_size, split.views);

  FUZZ_CHECK(a.frames == b.frames);
  FUZZ_CHECK(a.error == b.error);
  FUZZ_CHECK(a.idle == b.idle);
  // What was decoded is exactly the front of the input; idle means nothing partial is held.
  FUZZ_CHECK(input.payload.substr(0, a.reencoded.size()) == a.reencoded);
  if (!a.error) FUZZ_CHECK(a.idle == (a.reencoded.size() == input.payload.size()));
  return 0;
}
