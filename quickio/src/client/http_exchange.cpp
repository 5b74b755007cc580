#include "http_exchange.hpp"

#include <websocketpp/common/memory.hpp>
#include <websocketpp/http/response.hpp>

#include "polybus/error.hpp"
#include "polybus/url.hpp"

namespace polybus::quickio::detail {

std::string new_session_id(std::mt19937_64& random) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string sid;
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = random();
    for (int i = 0; i < 16; ++i, bits >>= 4) sid.push_back(kHex[bits & 0xF]);
  }
  return sid;
}

std::string make_poll_request(std::string_view host, std::string_view path, std::string_view sid,
                              bool connect, std::string_view body) {
  std::string out;
  out.reserve(160 + body.size());
  out.append("POST ").append(path.empty() ? "/" : path).append("?sid=").append(sid);
  if (connect) out.append("&connect=true");
  out.append(" HTTP/1.1\r\nHost: ").append(host);
  out.append("\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ");
  out.append(std::to_string(body.size())).append("\r\n\r\n").append(body);
  return out;
}

struct HttpResponseReader::Parser {
  websocketpp::http::parser::response response;
};

HttpResponseReader::HttpResponseReader(std::size_t max_size)
    : parser_(std::make_unique<Parser>()), max_size_(max_size) {}
HttpResponseReader::~HttpResponseReader() = default;

int http_status_of(std::string_view status_line) {
  const std::size_t space = status_line.find(' ');
  if (space == std::string_view::npos || status_line.size() < space + 4) return -1;
  int status = 0;
  for (std::size_t i = space + 1; i < space + 4; ++i) {
    if (status_line[i] < '0' || status_line[i] > '9') return -1;
    status = status * 10 + (status_line[i] - '0');
  }
  // Exactly three digits: "1010" would reach websocketpp whole.
  if (status_line.size() > space + 4 && status_line[space + 4] != ' ' &&
      status_line[space + 4] != '\r' && status_line[space + 4] != '\n')
    return -1;
  // 511 is the last status websocketpp's enum holds; 512-599 are unassigned in HTTP anyway.
  return status >= 100 && status <= 511 ? status : -1;
}

std::error_code HttpResponseReader::feed(std::string_view bytes, std::string& why) {
  if (complete_) return {};
  fed_ += bytes.size();
  if (fed_ > max_size_ + 64 * 1024) {
    why = "an HTTP response of more than " + std::to_string(fed_) +
          " bytes: exceeds max_frame_size=" + std::to_string(max_size_);
    return make_error_code(polybus::errc::frame_too_large);
  }
  if (to_close_) {
    body_.append(bytes);
    return {};
  }
  auto& r = parser_->response;
  if (status_line_.empty() || status_line_.back() != '\n') {
    const std::size_t newline = bytes.find('\n');
    const std::size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
    status_line_.append(bytes.substr(0, take));
    if (status_line_.size() > 8 * 1024 && status_line_.back() != '\n') {
      why = "HTTP status line over 8 KiB";
      return make_error_code(polybus::errc::protocol_error);
    }
    if (!status_line_.empty() && status_line_.back() == '\n' && http_status_of(status_line_) < 0) {
      why = "HTTP status line without a status from 100 to 511: " + status_line_.substr(0, 64);
      return make_error_code(polybus::errc::protocol_error);
    }
  }
  try {
    bool had_headers = r.headers_ready();
    std::size_t used = r.consume(bytes.data(), bytes.size());
    if (!had_headers && r.headers_ready()) {
      status_ = http_status_of(status_line_);
      if (status_ < 0) {
        why = "HTTP status line without a status from 100 to 511: " + status_line_.substr(0, 64);
        return make_error_code(polybus::errc::protocol_error);
      }
      const std::string& length = r.get_header("Content-Length");
      if (!r.get_header("Transfer-Encoding").empty()) {
        why = "chunked HTTP responses are not supported";
        return make_error_code(polybus::errc::protocol_error);
      }
      if (length.empty()) {
        to_close_ = true;
        body_.append(bytes.substr(std::min(used, bytes.size())));
        return {};
      }
      if (length.size() > 12 || std::stoull(length) > max_size_) {
        why = "HTTP Content-Length " + length + ": exceeds max_frame_size=" +
              std::to_string(max_size_);
        return make_error_code(polybus::errc::frame_too_large);
      }
      if (std::stoull(length) == 0) {  // websocketpp waits for a body byte that never comes
        complete_ = true;
        return {};
      }
    }
    if (r.ready()) {
      complete_ = true;
      body_ = r.get_body();
    }
  } catch (const std::exception& e) {
    why = std::string("malformed HTTP response: ") + e.what();
    return make_error_code(polybus::errc::protocol_error);
  }
  return {};
}

std::error_code HttpResponseReader::finish(std::string& why) {
  if (complete_) return {};
  if (to_close_) {
    complete_ = true;
    return {};
  }
  why = "the HTTP response was cut short";
  return make_error_code(polybus::errc::protocol_error);
}

bool parse_host_answer(std::string_view address, HostAnswer& out) {
  if (address.empty()) return false;
  try {
    std::string text(address);
    Url url = Url::parse(text.find("://") == std::string::npos ? "http://" + text : text);
    if (url.hosts.size() != 1 || url.hosts.front().host.empty()) return false;
    out.host = url.hosts.front().host;
    out.port = url.hosts.front().port;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace polybus::quickio::detail
