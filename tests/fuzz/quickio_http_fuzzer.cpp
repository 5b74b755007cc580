// SPDX-License-Identifier: Apache-2.0
// QuickIO over HTTP long polling, what the client reads: core's http::ResponseReader fed the
// payload whole and split, finish() at the end, then the body as HttpLink::on_response reads it
// (the /qio/hostname answer line, parse_host_answer, then one event per line). Input:
// fuzz_util.hpp's [control][splits][payload]; the flags pick max_size. Checks: bodies stay
// within max_size; every error says why; whole and split end alike; no exception escapes.
#include "fuzz_util.hpp"
#include "http_exchange.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/http.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::detail;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxSizes[16] = {16 << 20, 0,   1,    8,    16,   64,    100,   128,
                                       256,      512, 1024, 4096, 8192, 16384, 32768, 65536};

struct Outcome {
  bool complete = false;
  int status = 0;
  std::string body;
  std::error_code error;
};

// As HttpLink::on_response: the first line answers /qio/hostname, the rest are events.
void read_body(std::string_view body) {
  std::string_view rest = body;
  std::string_view first = rest.substr(0, rest.find('\n'));
  rest.remove_prefix(std::min(rest.size(), first.size() + 1));
  Event event;
  CallbackBody answer;
  std::string host;
  HostAnswer parsed;
  if (!parse_event(first, event) && callback_path_id(event.path) == 1u &&
      !parse_callback_body(event.json, answer) && answer.code == 200) {
    if (json_unquote(answer.data_json, host) && parse_host_answer(host, parsed))
      FUZZ_CHECK(!parsed.host.empty());
  }
  for_each_line(rest, [](std::string_view line) {
    Event e;
    if (!line.empty() && !parse_event(line, e)) polybus::fuzz::touch(e.json);
  });
}

Outcome run(std::size_t max_size, const std::vector<std::string_view>& parts) {
  polybus::http::ResponseReader reader(max_size, "max_frame_size");
  Outcome o;
  for (auto part : parts) {
    if ((o.error = reader.feed(part))) {
      FUZZ_CHECK(!reader.why().empty());
      return o;
    }
    if (reader.complete()) break;
  }
  if (!reader.complete() && (o.error = reader.finish())) {
    FUZZ_CHECK(!reader.why().empty());
    return o;
  }
  FUZZ_CHECK(reader.complete());
  FUZZ_CHECK(reader.body().size() <= max_size);
  o.complete = true;
  o.status = reader.status();
  o.body = reader.body();
  OwnedChunks body({o.body});
  read_body(body.views[0]);
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
  // The /qio/hostname answer on its own, as any text.
  HostAnswer parsed;
  if (parse_host_answer(input.payload, parsed)) FUZZ_CHECK(!parsed.host.empty());
  return 0;
}
