#include "http_response.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "polybus/adapter/text.hpp"
#include "polybus/error.hpp"

namespace polybus::nsq {
namespace {

std::error_code malformed() { return make_error_code(polybus::errc::protocol_error); }

using text::ascii_lower;
using text::trim_http_space;

}  // namespace

std::error_code HttpResponseParser::feed(std::string_view bytes) {
  if (complete_) return {};
  if (raw_.size() + bytes.size() > max_size_) return make_error_code(polybus::errc::frame_too_large);
  raw_.append(bytes);
  return parse();
}

std::error_code HttpResponseParser::finish() {
  if (complete_) return {};
  if (!headers_done_ || has_length_ || chunked_) return malformed();  // cut short
  body_ = raw_.substr(body_start_);
  complete_ = true;
  return {};
}

std::error_code HttpResponseParser::parse() {
  if (!headers_done_) {
    auto end = raw_.find("\r\n\r\n");
    if (end == std::string::npos) return raw_.size() > 64 * 1024 ? malformed() : std::error_code{};
    std::string_view head(raw_.data(), end);
    auto line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (status_line.substr(0, 7) != "HTTP/1." || status_line.size() < 12) return malformed();
    auto code = status_line.substr(9, 3);
    if (std::from_chars(code.data(), code.data() + 3, status_).ec != std::errc() || status_ < 100 ||
        status_ > 599)
      return malformed();
    std::string_view rest = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
    while (!rest.empty()) {
      auto eol = rest.find("\r\n");
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? "" : rest.substr(eol + 2);
      auto colon = line.find(':');
      if (colon == std::string_view::npos) return malformed();
      std::string name = ascii_lower(trim_http_space(line.substr(0, colon)));
      std::string_view value = trim_http_space(line.substr(colon + 1));
      if (name == "content-length") {
        if (std::from_chars(value.data(), value.data() + value.size(), length_).ec != std::errc() ||
            length_ > max_size_)
          return malformed();
        has_length_ = true;
      } else if (name == "transfer-encoding" && ascii_lower(value).find("chunked") != std::string::npos) {
        chunked_ = true;
      }
    }
    headers_done_ = true;
    body_start_ = end + 4;
  }
  std::string_view body(raw_.data() + body_start_, raw_.size() - body_start_);
  if (chunked_) {
    std::string decoded;
    while (true) {
      auto eol = body.find("\r\n");
      if (eol == std::string_view::npos) return {};
      std::size_t size = 0;
      auto hex = body.substr(0, body.substr(0, eol).find(';'));
      if (std::from_chars(hex.data(), hex.data() + hex.size(), size, 16).ec != std::errc() ||
          size > max_size_)
        return malformed();
      if (size == 0) {
        body_ = std::move(decoded);
        complete_ = true;
        return {};
      }
      if (body.size() < eol + 2 + size + 2) return {};
      decoded.append(body.substr(eol + 2, size));
      body.remove_prefix(eol + 2 + size + 2);
    }
  }
  if (has_length_ && body.size() >= length_) {
    body_ = std::string(body.substr(0, length_));
    complete_ = true;
  }
  return {};
}

}  // namespace polybus::nsq
