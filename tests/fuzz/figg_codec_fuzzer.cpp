// SPDX-License-Identifier: Apache-2.0
// Figg's codec: FrameParser fed the payload whole and split, and every payload parser on every
// frame. Input: fuzz_util.hpp's [control][splits][payload]; the flags pick max_payload.
// Checks: frames and the final error agree whole and split; consumed never exceeds the input;
// every frame re-encodes to the bytes it came from; whatever a payload parser accepts, the
// matching encoder writes back byte for byte (ATTACH: back to the same fields).
#include "fuzz_util.hpp"
#include "polybus/figg/codec.hpp"

using namespace polybus::figg;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxPayloads[16] = {16 << 20, 0,  1,   8,   12,   16,   20,    24,
                                          32,       64, 100, 256, 1024, 4096, 65536, 1 << 20};

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}
void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// Every payload parser on the payload; each success re-encoded.
void check_payload(std::string_view payload) {
  auto encoded_payload = [](const std::string& frame) {
    FUZZ_CHECK(frame.size() >= kHeaderSize);
    return frame.substr(kHeaderSize);
  };
  Attach attach;
  if (!parse_attach(payload, attach)) {
    FUZZ_CHECK(!attach.topic.empty() && attach.topic.size() <= kMaxTopicLength);
    std::string out;
    append_attach(out, attach.topic, attach.from_offset, attach.offset);
    const std::string written = encoded_payload(out);  // `again` views it
    Attach again;
    FUZZ_CHECK(!parse_attach(written, again));
    FUZZ_CHECK(again.topic == attach.topic && again.from_offset == attach.from_offset);
    if (attach.from_offset) FUZZ_CHECK(again.offset == attach.offset);
  }
  std::string_view topic;
  if (!parse_topic(payload, topic)) {
    FUZZ_CHECK(!topic.empty() && topic.size() <= kMaxTopicLength);
    std::string out;
    append_detach(out, topic);
    FUZZ_CHECK(encoded_payload(out) == payload);
  }
  TopicOffset attached;
  if (!parse_attached(payload, attached)) {
    std::string out;
    append_attached(out, attached.topic, attached.offset);
    FUZZ_CHECK(encoded_payload(out) == payload);
  }
  Publish publish;
  if (!parse_publish(payload, publish)) {
    std::string out;
    append_publish_header(out, publish.topic, publish.seq, publish.data.size());
    out.append(publish.data);
    FUZZ_CHECK(encoded_payload(out) == payload);
  }
  Data data;
  if (!parse_data(payload, data)) {
    std::string out;
    append_data_header(out, data.topic, data.offset, data.data.size());
    out.append(data.data);
    FUZZ_CHECK(encoded_payload(out) == payload);
  }
  std::uint64_t value = 0;
  if (!parse_u64(payload, value)) {
    std::string out;
    append_ack(out, value);
    FUZZ_CHECK(encoded_payload(out) == payload);
  }
}

struct Outcome {
  std::vector<std::string> frames;  // re-encoded
  std::error_code error;
};

Outcome run(std::size_t max_payload, const std::vector<std::string_view>& parts) {
  FrameParser parser(max_payload);
  Outcome o;
  for (auto part : parts) {
    std::string_view in = part;
    while (!in.empty()) {
      Frame frame;
      auto r = parser.feed(in, frame);
      FUZZ_CHECK(r.consumed <= in.size());
      if (r.error) {
        FUZZ_CHECK(!r.has_frame);
        Frame again;
        auto sticky = parser.feed(in.substr(r.consumed), again);
        FUZZ_CHECK(sticky.error == r.error && !sticky.has_frame);
        o.error = r.error;
        return o;
      }
      FUZZ_CHECK(r.consumed > 0 || r.has_frame);
      if (r.has_frame) {
        FUZZ_CHECK(frame.payload.size() <= max_payload);
        if (!frame.in_parser_buffer)
          FUZZ_CHECK(frame.payload.data() >= in.data() &&
                     frame.payload.data() + frame.payload.size() <= in.data() + r.consumed);
        check_payload(frame.payload);
        std::string encoded;
        put16(encoded, static_cast<std::uint16_t>(frame.type));
        put16(encoded, frame.version);
        put32(encoded, static_cast<std::uint32_t>(frame.payload.size()));
        encoded.append(frame.payload);
        o.frames.push_back(std::move(encoded));
      }
      in.remove_prefix(r.consumed);
    }
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const std::size_t max_payload = kMaxPayloads[input.flags];
  OwnedChunks whole({input.payload});
  Outcome a = run(max_payload, whole.views);
  OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
  Outcome b = run(max_payload, split.views);
  FUZZ_CHECK(a.frames == b.frames);
  FUZZ_CHECK(a.error == b.error);
  std::string joined;
  for (const auto& f : a.frames) joined += f;
  FUZZ_CHECK(input.payload.substr(0, joined.size()) == joined);
  // The payload parsers on the raw payload too, framed or not.
  OwnedChunks raw({input.payload});
  check_payload(raw.views[0]);
  return 0;
}
