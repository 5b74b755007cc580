// SPDX-License-Identifier: Apache-2.0
// QuickIO event texts and paths: parse_event (`<path>:<callback id>=<json>`), clean_path,
// is_valid_path, callback_path_id and for_each_line on the whole input. Checks: an accepted
// event's parts are views of the text and make_event gives back an event that parses the same;
// clean_path always gives a valid path and is idempotent; callback ids round-trip; the lines of
// a body joined with '\n' give the body back.
#include "fuzz_util.hpp"
#include "polybus/quickio/codec.hpp"

using namespace polybus::quickio;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  const std::string_view text(copy.get(), size);

  Event event;
  std::string why;
  if (auto ec = parse_event(text, event, &why)) {
    FUZZ_CHECK(!why.empty());
    FUZZ_CHECK(why.size() < 300);  // excerpts are bounded: 40 bytes, each at most \xNN
  } else {
    FUZZ_CHECK(is_valid_path(event.path));
    FUZZ_CHECK(event.path.data() == text.data());
    FUZZ_CHECK(event.json.data() + event.json.size() == text.data() + text.size());
    FUZZ_CHECK(is_valid_json(event.json));
    std::string again = make_event(event.path, event.callback_id, event.json);
    Event reparsed;
    FUZZ_CHECK(!parse_event(again, reparsed));
    FUZZ_CHECK(reparsed.path == event.path && reparsed.callback_id == event.callback_id &&
               reparsed.json == event.json);
    if (auto id = callback_path_id(event.path)) {
      FUZZ_CHECK(*id != 0);
      FUZZ_CHECK(callback_path_id(callback_path(*id)) == id);
    }
  }

  std::string clean = clean_path(text);
  FUZZ_CHECK(is_valid_path(clean));
  FUZZ_CHECK(clean_path(clean) == clean);
  FUZZ_CHECK(is_clean_path(clean));
  FUZZ_CHECK(is_clean_path(text) == (clean == text));
  FUZZ_CHECK(clean.find("//") == std::string::npos);
  FUZZ_CHECK(clean == "/" || clean.back() != '/');
  if (is_valid_path(text) && text.find("//") == std::string_view::npos &&
      (text.size() == 1 || text.back() != '/'))
    FUZZ_CHECK(clean == text);

  if (auto id = callback_path_id(text)) FUZZ_CHECK(callback_path(*id).size() <= text.size());

  std::string joined;
  bool first = true;
  for_each_line(text, [&](std::string_view line) {
    FUZZ_CHECK(line.find('\n') == std::string_view::npos);
    if (!first) joined += '\n';
    joined.append(line);
    first = false;
  });
  if (!text.empty() && text.back() == '\n') joined += '\n';
  FUZZ_CHECK(joined == text);
  return 0;
}
