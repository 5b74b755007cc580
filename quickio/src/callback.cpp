// SPDX-License-Identifier: Apache-2.0
// Callback paths (/qio/callback/<id>) and callback bodies ({"code":N,"data":X,"err_msg":S}).
#include <rapidjson/document.h>

#include <limits>
#include <optional>

#include "decimal.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"

namespace polybus::quickio {
namespace {

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The end of the string literal that starts at json[i] ('"'): the index after its closing quote.
std::size_t string_end(std::string_view json, std::size_t i) {
  for (++i; i < json.size(); ++i) {
    if (json[i] == '\\')
      ++i;
    else if (json[i] == '"')
      return i + 1;
  }
  return json.size();
}

// The end of the value that starts at json[i], scanned without recursion.
std::size_t value_end(std::string_view json, std::size_t i) {
  if (json[i] == '"') return string_end(json, i);
  if (json[i] != '{' && json[i] != '[') {
    while (i < json.size() && json[i] != ',' && json[i] != '}' && json[i] != ']' &&
           !is_json_space(json[i]))
      ++i;
    return i;
  }
  std::size_t depth = 0;
  while (i < json.size()) {
    char c = json[i];
    if (c == '"') {
      i = string_end(json, i);
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    ++i;
  }
  return i;
}

// The exact text of the top-level member `name` of `json`, which must already be known to be
// a well-formed object: no re-serialisation, so numbers, escapes and nesting arrive as the
// server wrote them (a DOM round trip rewrites 0.30000000000000004 and overflows 1.8e308).
std::optional<std::string_view> raw_member(std::string_view json, std::string_view name) {
  std::size_t i = 0;
  auto skip = [&] {
    while (i < json.size() && is_json_space(json[i])) ++i;
  };
  skip();
  if (i >= json.size() || json[i] != '{') return std::nullopt;
  ++i;
  for (;;) {
    skip();
    if (i >= json.size() || json[i] != '"') return std::nullopt;  // '}' of an empty object
    const std::size_t key_start = i;
    i = string_end(json, i);
    std::string key;
    const bool match = json_unquote(json.substr(key_start, i - key_start), key) && key == name;
    skip();
    ++i;  // ':'
    skip();
    if (i >= json.size()) return std::nullopt;
    const std::size_t value_start = i;
    i = value_end(json, i);
    if (match) return json.substr(value_start, i - value_start);
    skip();
    if (i >= json.size() || json[i] != ',') return std::nullopt;
    ++i;
  }
}

}  // namespace

bool detail::parse_decimal_u64(std::string_view digits, std::uint64_t& out) {
  if (digits.empty() || digits.size() > 20) return false;
  std::uint64_t value = 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (kMax - digit) / 10) return false;
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

std::optional<std::uint64_t> callback_path_id(std::string_view path) {
  if (path.substr(0, kCallbackPrefix.size()) != kCallbackPrefix) return std::nullopt;
  std::uint64_t id = 0;
  if (!detail::parse_decimal_u64(path.substr(kCallbackPrefix.size()), id) || id == 0)
    return std::nullopt;
  return id;
}

std::string callback_path(std::uint64_t id) {
  std::string out(kCallbackPrefix);
  out += std::to_string(id);
  return out;
}

std::error_code parse_callback_body(std::string_view json, CallbackBody& out, std::string* why,
                                    std::size_t max_depth) {
  auto fail = [why](std::string message) {
    if (why) *why = std::move(message);
    return make_error_code(codec_errc::malformed_callback_body);
  };
  // The depth bound also keeps the recursive re-serialisation of "data" below off deep input.
  if (!is_valid_json(json, max_depth))
    return fail("callback body is not well-formed JSON or is nested deeper than " +
                std::to_string(max_depth));
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError()) return fail("callback body is not well-formed JSON");
  if (!doc.IsObject()) return fail("callback body is not a JSON object");
  auto code = doc.FindMember("code");
  if (code == doc.MemberEnd()) return fail("callback body has no \"code\"");
  if (!code->value.IsInt()) return fail("callback body \"code\" is not an integer");
  CallbackBody body;
  body.code = code->value.GetInt();
  if (auto data = raw_member(json, "data"))
    body.data_json.assign(*data);
  else
    body.data_json = "null";
  auto err_msg = doc.FindMember("err_msg");
  // The real server writes "err_msg":null when it has no text (e.g. 404 to /qio/on of a path no
  // application handles): the same as no err_msg.
  if (err_msg != doc.MemberEnd() && !err_msg->value.IsNull()) {
    if (!err_msg->value.IsString())
      return fail("callback body \"err_msg\" is neither a string nor null");
    body.err_msg.assign(err_msg->value.GetString(), err_msg->value.GetStringLength());
  }
  out = std::move(body);
  return {};
}

std::string make_callback_body(int code, std::string_view data_json, std::string_view err_msg) {
  std::string out = "{\"code\":";
  out += std::to_string(code);
  out += ",\"data\":";
  out.append(data_json.empty() ? std::string_view("null") : data_json);
  if (!err_msg.empty()) {
    out += ",\"err_msg\":";
    out += text::json_quote(err_msg);
  }
  out += '}';
  return out;
}

}  // namespace polybus::quickio
