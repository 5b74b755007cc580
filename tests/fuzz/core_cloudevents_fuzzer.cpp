// SPDX-License-Identifier: Apache-2.0
// The CloudEvents envelope codec (polybus/cloudevents.hpp), reading whatever a publisher sent.
// Input: byte 0 sets max_json_depth (1 + its low 5 bits); the rest is the message payload.
// Checks: decode() either names what is wrong or gives at most kMaxAttributes headers, each a
// valid specversion/id/source/type set; the payload it gives (a view into the input or its own
// storage) is readable; and what decoded, written again with encode() from its own headers,
// decodes to the same payload and headers. encode() refuses only a JSON content type over a
// payload that is not JSON, or headers it cannot carry.
#include "fuzz_util.hpp"
#include "polybus/cloudevents.hpp"

using namespace polybus;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t depth = 1 + (data[0] & 0x1f);
  const std::string_view json(reinterpret_cast<const char*>(data) + 1, size - 1);
  cloudevents::Event event;
  const std::string why = cloudevents::decode(json, depth, event);
  if (!why.empty()) return 0;
  FUZZ_CHECK(event.headers.size() <= cloudevents::kMaxAttributes);
  FUZZ_CHECK(event.headers.get("specversion") == std::string_view("1.0"));
  for (auto name : {"id", "source", "type"}) {
    auto value = event.headers.get(name);
    FUZZ_CHECK(value && !value->empty());
  }
  const std::string payload(event.payload);  // readable, wherever it points

  // Again, from what it read: the headers an envelope can carry.
  Headers carried;
  for (const auto& [name, value] : event.headers)
    if (name != "specversion" && cloudevents::check_header_name(name).empty() &&
        polybus::text::is_valid_utf8(value))
      carried.set(name, value);
  std::string again;
  const std::string refused =
      cloudevents::encode(payload, carried, {"id", "source", "type", ""}, depth, again);
  if (!refused.empty()) {
    FUZZ_CHECK(again.empty());
    const auto type = carried.get("datacontenttype");
    FUZZ_CHECK(type && cloudevents::is_json_content_type(*type));
    return 0;
  }
  cloudevents::Event back;
  const std::string why_back = cloudevents::decode(again, depth, back);
  if (!why_back.empty()) {
    std::fprintf(stderr, "re-encoded event does not decode: %s\n%s\n", why_back.c_str(),
                 again.c_str());
    FUZZ_CHECK(!"re-encoded event decodes");
  }
  FUZZ_CHECK(back.payload == payload);
  for (const auto& [name, value] : carried) FUZZ_CHECK(back.headers.get(name) == value);
  return 0;
}
