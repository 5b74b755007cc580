#include "http_request.hpp"

#include <algorithm>

#include "polybus/adapter/text.hpp"

namespace polybus::quickio::testing {
namespace {

using polybus::text::ascii_lower;
using polybus::text::trim_http_space;

bool parse_size(std::string_view digits, std::size_t& out) {
  if (digits.empty() || digits.size() > 15) return false;
  std::size_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  out = value;
  return true;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

bool HttpRequest::keep_alive() const {
  const std::string* connection = header("connection");
  std::string value = connection ? ascii_lower(*connection) : std::string();
  if (value.find("close") != std::string::npos) return false;
  return http_1_1 || value.find("keep-alive") != std::string::npos;
}

std::optional<std::string> HttpRequest::query(std::string_view name) const {
  std::string_view rest(target);
  std::size_t question = rest.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  rest.remove_prefix(question + 1);
  while (!rest.empty()) {
    std::size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    std::size_t equals = pair.find('=');
    if (pair.substr(0, equals) == name)
      return std::string(equals == std::string_view::npos ? std::string_view()
                                                          : pair.substr(equals + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

HttpRequestParser::HttpRequestParser(std::size_t max_head, std::size_t max_body)
    : max_head_(max_head), max_body_(max_body) {}

void HttpRequestParser::next() {
  state_ = State::head;
  head_.clear();
  request_ = HttpRequest{};
}

HttpRequestParser::Result HttpRequestParser::feed(std::string_view input) {
  if (state_ == State::head) {
    // Only the new bytes (and the three before them) can complete "\r\n\r\n".
    std::size_t from = head_.size() < 3 ? 0 : head_.size() - 3;
    std::size_t room = max_head_ - head_.size();
    head_.append(input.substr(0, std::min(room, input.size())));
    std::size_t end = head_.find("\r\n\r\n", from);
    if (end == std::string::npos) {
      if (head_.size() >= max_head_) return {input.size(), Status::error, 431};
      return {input.size(), Status::need_more, 0};
    }
    std::size_t previous = head_.size() - std::min(room, input.size());
    std::size_t consumed = end + 4 - previous;
    head_.resize(end + 4);
    return parse_head(consumed);
  }
  if (state_ == State::body) {
    std::size_t want = *request_.content_length - request_.body.size();
    std::size_t n = std::min(want, input.size());
    request_.body.append(input.substr(0, n));
    if (request_.body.size() < *request_.content_length) return {n, Status::need_more, 0};
    state_ = State::done;
    return {n, Status::request_ready, 0};
  }
  return {0, Status::request_ready, 0};
}

HttpRequestParser::Result HttpRequestParser::parse_head(std::size_t consumed) {
  std::string_view head(head_);
  head.remove_suffix(4);
  std::size_t line_end = head.find("\r\n");
  std::string_view line = head.substr(0, line_end);
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return {consumed, Status::error, 400};
  request_.method = std::string(line.substr(0, sp1));
  request_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.1") {
    request_.http_1_1 = true;
  } else if (version == "HTTP/1.0") {
    request_.http_1_1 = false;
  } else {
    return {consumed, Status::error, 400};
  }
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    std::size_t end = rest.find("\r\n");
    std::string_view header = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    std::size_t colon = header.find(':');
    if (colon == std::string_view::npos || colon == 0) return {consumed, Status::error, 400};
    request_.headers.emplace_back(ascii_lower(header.substr(0, colon)),
                                  std::string(trim_http_space(header.substr(colon + 1))));
  }
  if (const std::string* te = request_.header("transfer-encoding"))
    request_.chunked = ascii_lower(*te).find("chunked") != std::string::npos;
  if (const std::string* length = request_.header("content-length")) {
    std::size_t size = 0;
    if (!parse_size(*length, size)) return {consumed, Status::error, 400};
    if (size > max_body_) return {consumed, Status::error, 413};
    request_.content_length = size;
  }
  state_ = request_.content_length.value_or(0) > 0 ? State::body : State::done;
  return {consumed, Status::head_ready, 0};
}

}  // namespace polybus::quickio::testing
