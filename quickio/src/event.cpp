// SPDX-License-Identifier: Apache-2.0
// The event text `<path>:<callback id>=<json>` and event paths.
#include "decimal.hpp"
#include "polybus/quickio/codec.hpp"

namespace polybus::quickio {
namespace {

bool is_path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '/' || c == '-';
}

std::error_code fail(codec_errc e, std::string* why, std::string message) {
  if (why) *why = std::move(message);
  return make_error_code(e);
}

// Printable excerpt for messages: bounded, control bytes escaped.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 40;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}

}  // namespace

bool is_valid_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  for (char c : path)
    if (!is_path_char(c)) return false;
  return true;
}

std::error_code parse_event(std::string_view text, Event& out, std::string* why,
                            std::size_t max_json_depth) {
  std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return fail(codec_errc::malformed_event, why,
                "event has no ':' after its path: \"" + excerpt(text) + "\"");
  std::size_t equals = text.find('=', colon + 1);
  if (equals == std::string_view::npos)
    return fail(codec_errc::malformed_event, why,
                "event has no '=' after its callback id: \"" + excerpt(text) + "\"");
  std::string_view path = text.substr(0, colon);
  if (path.empty()) return fail(codec_errc::invalid_path, why, "event path is empty");
  if (path.front() != '/')
    return fail(codec_errc::invalid_path, why,
                "event path does not start with '/': \"" + excerpt(path) + "\"");
  for (char c : path) {
    if (!is_path_char(c))
      return fail(codec_errc::invalid_path, why,
                  "event path has a character outside [A-Za-z0-9_/-]: \"" + excerpt(path) + "\"");
  }
  std::string_view id_text = text.substr(colon + 1, equals - colon - 1);
  std::uint64_t id = 0;
  if (!detail::parse_decimal_u64(id_text, id))
    return fail(codec_errc::invalid_callback_id, why,
                "event callback id is not a decimal uint64: \"" + excerpt(id_text) + "\"");
  std::string_view json = text.substr(equals + 1);
  if (!is_valid_json(json, max_json_depth))
    return fail(codec_errc::invalid_json, why,
                "event data is not well-formed JSON nested at most " +
                    std::to_string(max_json_depth) + " deep (max_json_depth): \"" + excerpt(json) +
                    "\"");
  out.path = path;
  out.callback_id = id;
  out.json = json;
  return {};
}

void append_event(std::string& out, std::string_view path, std::uint64_t callback_id,
                  std::string_view json) {
  out.append(path);
  out.push_back(':');
  out.append(std::to_string(callback_id));
  out.push_back('=');
  out.append(json);
}

std::string make_event(std::string_view path, std::uint64_t callback_id, std::string_view json) {
  std::string out;
  out.reserve(path.size() + json.size() + 22);
  append_event(out, path, callback_id, json);
  return out;
}

std::string clean_path(std::string_view path) {
  std::string out = "/";
  for (char c : path) {
    if (!is_path_char(c)) continue;
    if (c == '/' && out.back() == '/') continue;
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool is_clean_path(std::string_view path) {
  if (!is_valid_path(path)) return false;
  if (path.size() > 1 && path.back() == '/') return false;
  return path.find("//") == std::string_view::npos;
}

}  // namespace polybus::quickio
