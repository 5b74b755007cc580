// QuickIO over HTTP long polling, what the client reads: HttpResponseReader
// (quickio/src/client/http_exchange.*, over websocketpp's response parser) fed the payload whole
// and split, finish() at the end, then the body as HttpLink::on_response reads it (the
// /qio/hostname answer line, parse_host_answer, then one event per line). Input: fuzz_util.hpp's
// [control][splits][payload]; the flags pick max_size. Checks: bodies stay within max_size;
// whole and split agree when both complete; no exception escapes.
#include "fuzz_util.hpp"
#include "http_exchange.hpp"
#include "polybus/quickio/codec.hpp"

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
  HttpResponseReader reader(max_size);
  Outcome o;
  std::string why;
  for (auto part : parts) {
    if (reader.feed(part, why)) {
      FUZZ_CHECK(!why.empty());
      return o;
    }
    if (reader.complete()) break;
  }
  if (!reader.complete() && reader.finish(why)) return o;
  FUZZ_CHECK(reader.complete());
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
  // Known finding 3: a status code outside 0-511 is undefined behaviour inside websocketpp.
  if (!polybus::fuzz::known_findings() &&
      polybus::fuzz::websocketpp_status_outside_enum(input.payload))
    return 0;
  const std::size_t max_size = kMaxSizes[input.flags];
  OwnedChunks whole({input.payload});
  Outcome a = run(max_size, whole.views);
  OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
  Outcome b = run(max_size, split.views);
  if (a.complete && b.complete) {
    FUZZ_CHECK(a.status == b.status);
    FUZZ_CHECK(a.body == b.body);
  }
  // The /qio/hostname answer on its own, as any text.
  HostAnswer parsed;
  if (parse_host_answer(input.payload, parsed)) FUZZ_CHECK(!parsed.host.empty());
  return 0;
}
