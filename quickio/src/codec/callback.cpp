// Callback paths (/qio/callback/<id>) and callback bodies ({"code":N,"data":X,"err_msg":S}).
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <limits>

#include "decimal.hpp"
#include "polybus/quickio/codec.hpp"

namespace polybus::quickio {

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
  auto data = doc.FindMember("data");
  if (data == doc.MemberEnd()) {
    body.data_json = "null";
  } else {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    data->value.Accept(writer);
    body.data_json.assign(buffer.GetString(), buffer.GetSize());
  }
  auto err_msg = doc.FindMember("err_msg");
  if (err_msg != doc.MemberEnd()) {
    if (!err_msg->value.IsString()) return fail("callback body \"err_msg\" is not a string");
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
    out += json_quote(err_msg);
  }
  out += '}';
  return out;
}

}  // namespace polybus::quickio
