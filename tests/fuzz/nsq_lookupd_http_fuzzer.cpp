// SPDX-License-Identifier: Apache-2.0
// nsqlookupd's HTTP answers as the NSQ adapter reads them: core's http::ResponseReader fed the
// payload whole and split, finish() at the end of the stream, then parse_lookup_response on a
// complete body. Input: fuzz_util.hpp's [control][splits][payload]; the flags pick max_size.
// Checks: a body never exceeds max_size; a complete response has a status in 100-599; every
// error says why; whole and split end alike (the same error, or the same status and body).
#include "fuzz_util.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/text/http.hpp"

using namespace polybus::nsq;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxSizes[16] = {4 << 20, 0,    1,    16,   64,    100,   128,   256,
                                       512,     1024, 4096, 8192, 16384, 32768, 65536, 70000};

struct Outcome {
  bool complete = false;
  int status = 0;
  std::string body;
  std::error_code error;
};

Outcome run(std::size_t max_size, const std::vector<std::string_view>& parts) {
  polybus::http::ResponseReader parser(max_size, "lookupd_answer_limit");
  Outcome o;
  for (auto part : parts) {
    if (auto ec = parser.feed(part)) {
      FUZZ_CHECK(!parser.why().empty());
      o.error = ec;
      return o;
    }
    if (parser.complete()) break;
  }
  if (!parser.complete()) {
    if (auto ec = parser.finish()) {
      FUZZ_CHECK(!parser.complete() && !parser.why().empty());
      o.error = ec;
      return o;
    }
  }
  FUZZ_CHECK(parser.complete());
  FUZZ_CHECK(parser.body().size() <= max_size);
  FUZZ_CHECK(parser.status() >= 100 && parser.status() <= 599);
  o.complete = true;
  o.status = parser.status();
  o.body = parser.body();
  // What the lookupd client does with the body.
  OwnedChunks body({o.body});
  std::vector<LookupProducer> producers;
  if (!parse_lookup_response(body.views[0], producers))
    for (const auto& p : producers) FUZZ_CHECK(!p.broadcast_address.empty() && p.tcp_port > 0);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = polybus::fuzz::split_input(data, size);
  const std::size_t max_size = kMaxSizes[input.flags];
  OwnedChunks whole({input.payload});
  Outcome a = run(max_size, whole.views);
  OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
  Outcome b = run(max_size, split.views);
  FUZZ_CHECK(a.complete == b.complete && a.error == b.error);
  if (a.complete) {
    FUZZ_CHECK(a.status == b.status);
    FUZZ_CHECK(a.body == b.body);
  }
  return 0;
}
