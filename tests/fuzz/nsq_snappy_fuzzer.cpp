// SPDX-License-Identifier: Apache-2.0
// NSQ's snappy stream (framing format): SnappyFrameDecoder on the payload, whole and split, and
// SnappyFrameEncoder -> decoder round trips of the payload. Input: fuzz_util.hpp's
// [control][splits][payload]; flag 1: round trip (the payload is plain data, encoded in the
// split's pieces); flag 2: a small max_output_per_call. Checks: same output and error whole and
// split; one call never appends more than its maximum; what was encoded decodes to itself.
#include "fuzz_util.hpp"
#include "polybus/nsq/compression.hpp"

using namespace polybus::nsq;
using polybus::fuzz::OwnedChunks;

namespace {

struct Outcome {
  std::string out;
  std::error_code error;
  bool idle = true;
};

Outcome decode(const std::vector<std::string_view>& parts, std::size_t max_per_call) {
  SnappyFrameDecoder decoder(max_per_call);
  Outcome o;
  for (auto part : parts) {
    const std::size_t before = o.out.size();
    auto ec = decoder.decode(part, o.out);
    FUZZ_CHECK(o.out.size() - before <= max_per_call);
    if (ec) {
      FUZZ_CHECK(!decoder.idle());
      std::string more;
      FUZZ_CHECK(decoder.decode(part, more) == ec && more.empty());  // sticky
      o.error = ec;
      o.idle = false;
      return o;
    }
  }
  o.idle = decoder.idle();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const auto pieces = polybus::fuzz::chunks(input.payload, input.sizes);
  if (input.flags & 1) {
    // Round trip: the encoder flushes at every call, so the decoder gets every piece back.
    SnappyFrameEncoder encoder;
    std::string wire;
    std::vector<std::size_t> ends;
    for (auto piece : pieces) {
      encoder.encode(piece, wire);
      ends.push_back(wire.size());
    }
    SnappyFrameDecoder decoder;
    std::string plain;
    std::size_t from = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      OwnedChunks chunk({std::string_view(wire).substr(from, ends[i] - from)});
      FUZZ_CHECK(!decoder.decode(chunk.views[0], plain));
      from = ends[i];
      FUZZ_CHECK(decoder.idle());
    }
    FUZZ_CHECK(plain == input.payload);
    return 0;
  }
  const std::size_t max_per_call =
      (input.flags & 2) ? 4096 + input.flags * 1000 : kDefaultMaxDecodedPerCall;
  OwnedChunks whole({input.payload});
  Outcome a = decode(whole.views, max_per_call);
  OwnedChunks split(pieces);
  Outcome b = decode(split.views, max_per_call);
  // The output limit counts per call: only without it do whole and split decode alike.
  if (a.error != compression_errc::output_limit_exceeded &&
      b.error != compression_errc::output_limit_exceeded) {
    FUZZ_CHECK(a.error == b.error);
    FUZZ_CHECK(a.out == b.out);
    FUZZ_CHECK(a.idle == b.idle);
  }
  return 0;
}
