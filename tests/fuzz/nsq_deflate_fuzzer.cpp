// SPDX-License-Identifier: Apache-2.0
// NSQ's raw deflate stream: DeflateDecoder on the payload, whole and split, and DeflateEncoder ->
// decoder round trips. Input: fuzz_util.hpp's [control][splits][payload]; flag 1: round trip
// (the payload is plain data, encoded in the split's pieces at level 1 + flags / 2); flag 2: a
// small max_output_per_call. Checks: same output and error whole and split; one call never
// appends more than its maximum; what was encoded decodes to itself.
#include "fuzz_util.hpp"
#include "polybus/nsq/compression.hpp"

using namespace polybus::nsq;
using polybus::fuzz::OwnedChunks;

namespace {

struct Outcome {
  std::string out;
  std::error_code error;
};

Outcome decode(const std::vector<std::string_view>& parts, std::size_t max_per_call) {
  DeflateDecoder decoder(max_per_call);
  Outcome o;
  for (auto part : parts) {
    const std::size_t before = o.out.size();
    auto ec = decoder.decode(part, o.out);
    FUZZ_CHECK(o.out.size() - before <= max_per_call);
    if (ec) {
      std::string more;
      FUZZ_CHECK(decoder.decode(part, more) == ec && more.empty());  // sticky
      o.error = ec;
      return o;
    }
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const auto pieces = polybus::fuzz::chunks(input.payload, input.sizes);
  if (input.flags & 1) {
    DeflateEncoder encoder(1 + input.flags / 2);
    DeflateDecoder decoder;
    std::string plain;
    for (auto piece : pieces) {
      std::string wire;
      FUZZ_CHECK(!encoder.encode(piece, wire));
      FUZZ_CHECK(piece.empty() == wire.empty());
      OwnedChunks chunk({wire});
      FUZZ_CHECK(!decoder.decode(chunk.views[0], plain));
      // Flushed at every call: the decoder has everything so far.
      FUZZ_CHECK(plain.size() ==
                 static_cast<std::size_t>(piece.data() + piece.size() - input.payload.data()));
    }
    FUZZ_CHECK(plain == input.payload);
    return 0;
  }
  // Small enough that a bomb in 64 KiB of input reaches it quickly.
  const std::size_t max_per_call = (input.flags & 2) ? 1000 + input.flags * 100 : 1 << 20;
  OwnedChunks whole({input.payload});
  Outcome a = decode(whole.views, max_per_call);
  OwnedChunks split(pieces);
  Outcome b = decode(split.views, max_per_call);
  if (a.error != compression_errc::output_limit_exceeded &&
      b.error != compression_errc::output_limit_exceeded) {
    FUZZ_CHECK(a.error == b.error);
    if (!a.error) FUZZ_CHECK(a.out == b.out);
  }
  return 0;
}
