// SPDX-License-Identifier: Apache-2.0
// QuickIO's JSON helpers and callback bodies: is_valid_json, is_valid_utf8, json_quote,
// json_unquote, parse_callback_body and make_callback_body on the whole input. Checks: a string
// of valid UTF-8 quotes to valid JSON that unquotes to itself (and only valid UTF-8 does); an
// accepted callback body is made again by make_callback_body and parses to the same fields.
#include "fuzz_util.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"
#include "rapidjson_known.hpp"

using namespace polybus::quickio;
using polybus::text::is_valid_utf8;
using polybus::text::json_quote;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  const std::string_view text(copy.get(), size);

  const bool valid_json = is_valid_json(text);
  const bool utf8 = is_valid_utf8(text);
  if (valid_json) FUZZ_CHECK(text.find('\0') == std::string_view::npos);

  std::string quoted = json_quote(text);
  FUZZ_CHECK(is_valid_json(quoted) == utf8);
  if (utf8) {
    std::string back;
    FUZZ_CHECK(json_unquote(quoted, back));
    FUZZ_CHECK(back == text);
  }
  std::string unquoted;
  if (json_unquote(text, unquoted)) {
    FUZZ_CHECK(valid_json);
    // Known finding 1: a lone low-surrogate escape unquotes to bytes that are not UTF-8.
    if (polybus::fuzz::known_findings() || !polybus::fuzz::has_encoded_surrogate(unquoted))
      FUZZ_CHECK(is_valid_utf8(unquoted));
  }

  CallbackBody body;
  std::string why;
  if (!parse_callback_body(text, body, &why)) {
    FUZZ_CHECK(valid_json);
    // Known finding 5: a number read as infinity leaves data_json truncated.
    if (!polybus::fuzz::known_findings() && polybus::fuzz::rapidjson_reads_infinity(text)) return 0;
    // Known finding 1, as above: the data or err_msg then holds a surrogate that is not UTF-8.
    if (!polybus::fuzz::known_findings() && (polybus::fuzz::has_encoded_surrogate(body.data_json) ||
                                             polybus::fuzz::has_encoded_surrogate(body.err_msg)))
      return 0;
    FUZZ_CHECK(is_valid_json(body.data_json));
    std::string made = make_callback_body(body.code, body.data_json, body.err_msg);
    FUZZ_CHECK(is_valid_json(made));
    CallbackBody again;
    FUZZ_CHECK(!parse_callback_body(made, again));
    FUZZ_CHECK(again.code == body.code && again.err_msg == body.err_msg);
    // Known finding 4: data is re-serialized from RapidJSON's default (not full-precision)
    // number parsing, so a number with a fraction or an exponent can change on the way.
    if (polybus::fuzz::known_findings() || body.data_json.find_first_of(".eE") == std::string::npos)
      FUZZ_CHECK(again.data_json == body.data_json);
  } else {
    FUZZ_CHECK(!why.empty());
  }
  return 0;
}
