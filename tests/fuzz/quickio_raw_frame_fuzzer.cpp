// SPDX-License-Identifier: Apache-2.0
// QuickIO's raw TCP framing: RawFrameDecoder fed the payload whole and split (parse and feed),
// and append_raw_frame round trips. Input: fuzz_util.hpp's [control][splits][payload]; the flags
// pick max_frame_size. Checks: frames and the final error agree whole and split; consumed never
// exceeds the input; frames are within max_frame_size and re-encode to the bytes they came
// from; errors are sticky until reset().
#include "fuzz_util.hpp"
#include "polybus/quickio/codec.hpp"

using namespace polybus::quickio;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxSizes[16] = {16 << 20, 0,   1,   2,   7,    8,    9,     16,
                                       64,       100, 255, 256, 1024, 4096, 65536, 1 << 20};

struct Outcome {
  std::string reencoded;
  std::vector<std::string> frames;
  std::error_code error;
};

Outcome parse_all(std::size_t max, const std::vector<std::string_view>& parts) {
  RawFrameDecoder decoder(max);
  Outcome o;
  for (auto part : parts) {
    std::string_view in = part;
    while (!in.empty()) {
      std::string_view frame;
      auto r = decoder.parse(in, frame);
      FUZZ_CHECK(r.consumed <= in.size());
      if (r.error) {
        FUZZ_CHECK(!r.has_frame);
        std::string_view again;
        auto sticky = decoder.parse(in.substr(r.consumed), again);
        FUZZ_CHECK(sticky.error == r.error && sticky.consumed == 0 && !sticky.has_frame);
        o.error = r.error;
        decoder.reset();
        std::string ok;
        append_raw_frame(ok, "/a:0=1");
        std::string_view fresh;
        if (max >= 6) FUZZ_CHECK(decoder.parse(ok, fresh).has_frame && fresh == "/a:0=1");
        return o;
      }
      FUZZ_CHECK(r.consumed > 0 || r.has_frame);
      if (r.has_frame) {
        FUZZ_CHECK(!frame.empty() && frame.size() <= max);
        append_raw_frame(o.reencoded, frame);
        o.frames.emplace_back(frame);
      }
      in.remove_prefix(r.consumed);
    }
  }
  return o;
}

Outcome feed_all(std::size_t max, const std::vector<std::string_view>& parts) {
  RawFrameDecoder decoder(max);
  Outcome o;
  for (auto part : parts) {
    auto ec = decoder.feed(part, [&](std::string_view frame) {
      append_raw_frame(o.reencoded, frame);
      o.frames.emplace_back(frame);
    });
    if (ec) {
      o.error = ec;
      return o;
    }
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const std::size_t max = kMaxSizes[input.flags];
  OwnedChunks whole({input.payload});
  OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
  Outcome a = parse_all(max, whole.views);
  Outcome b = parse_all(max, split.views);
  Outcome c = feed_all(max, split.views);
  FUZZ_CHECK(a.frames == b.frames && a.error == b.error);
  FUZZ_CHECK(a.frames == c.frames && a.error == c.error);
  FUZZ_CHECK(input.payload.substr(0, a.reencoded.size()) == a.reencoded);
  return 0;
}
