#include "http_request.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "polybus/adapter/text.hpp"

namespace polybus::nsq::testing::detail {
namespace {

using polybus::text::ascii_lower;
using polybus::text::trim_http_space;

// As Go's url.QueryUnescape: %XX and '+' as a space.
bool unescape(std::string_view text, std::string& out) {
  return polybus::text::percent_decode(text, out, true) == polybus::text::PercentError::none;
}

}  // namespace

HttpRequestReader::Result HttpRequestReader::feed(std::string_view input) {
  Result result;
  if (in_body_) {
    const std::size_t take = std::min(body_remaining_, input.size());
    body_remaining_ -= take;
    result.consumed = take;
    if (body_remaining_ == 0) {
      in_body_ = false;
      result.status = Status::request;
    }
    return result;
  }
  // The head ends at the first empty line; look for it across what came before too.
  const std::size_t searched_from = head_.size() >= 3 ? head_.size() - 3 : 0;
  const std::size_t room = max_header_bytes_ - std::min(head_.size(), max_header_bytes_);
  const std::size_t take = std::min(input.size(), room + 1);
  head_.append(input.data(), take);
  std::size_t end = std::string::npos;
  std::size_t end_length = 0;
  for (std::size_t i = searched_from; i < head_.size(); ++i) {
    if (head_.compare(i, 4, "\r\n\r\n") == 0) {
      end = i;
      end_length = 4;
      break;
    }
    if (head_.compare(i, 2, "\n\n") == 0) {
      end = i;
      end_length = 2;
      break;
    }
  }
  if (end == std::string::npos) {
    result.consumed = take;
    if (head_.size() > max_header_bytes_) result.status = Status::too_large;
    return result;
  }
  // Give back what belongs to the next request (or this one's body).
  const std::size_t head_bytes = end + end_length;
  result.consumed = take - (head_.size() - head_bytes);
  head_.resize(head_bytes);
  result.status = parse_head();
  head_.clear();
  if (result.status == Status::request && body_remaining_ > 0) {
    in_body_ = true;
    result.status = Status::need_more;
  }
  return result;
}

HttpRequestReader::Status HttpRequestReader::parse_head() {
  std::string_view head(head_);
  auto next_line = [&head]() {
    const std::size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    head.remove_prefix(newline == std::string_view::npos ? head.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  std::string_view line = next_line();
  const std::size_t first_space = line.find(' ');
  const std::size_t last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    return Status::bad_request;
  }
  request_ = HttpRequest{};
  request_.method = std::string(line.substr(0, first_space));
  std::string_view target = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = line.substr(last_space + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return Status::bad_request;
  if (const std::size_t scheme = target.find("://"); scheme != std::string_view::npos) {
    const std::size_t path = target.find('/', scheme + 3);
    target = path == std::string_view::npos ? std::string_view("/") : target.substr(path);
  }
  const std::size_t question = target.find('?');
  request_.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) request_.query = std::string(target.substr(question + 1));
  request_.keep_alive = version == "HTTP/1.1";

  body_remaining_ = 0;
  while (!head.empty()) {
    line = next_line();
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Status::bad_request;
    const std::string name = ascii_lower(trim_http_space(line.substr(0, colon)));
    const std::string value = ascii_lower(trim_http_space(line.substr(colon + 1)));
    if (name == "connection") {
      if (value == "close") request_.keep_alive = false;
      if (value == "keep-alive") request_.keep_alive = true;
    } else if (name == "content-length") {
      std::size_t length = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), length);
      if (parsed.ec != std::errc() || parsed.ptr != value.data() + value.size()) {
        return Status::bad_request;
      }
      if (length > max_body_bytes_) return Status::too_large;
      body_remaining_ = length;
    } else if (name == "transfer-encoding" && value != "identity") {
      return Status::unsupported;
    }
  }
  return Status::request;
}

std::optional<std::string> query_value(std::string_view query, std::string_view key, bool& valid) {
  valid = true;
  std::optional<std::string> found;
  std::string decoded_key;
  std::string decoded_value;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    if (pair.empty()) continue;
    if (pair.find(';') != std::string_view::npos) {
      valid = false;  // Go 1.17+ refuses semicolons as separators
      return std::nullopt;
    }
    const std::size_t equals = pair.find('=');
    const std::string_view raw_value =
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
    if (!unescape(pair.substr(0, equals), decoded_key) || !unescape(raw_value, decoded_value)) {
      valid = false;
      return std::nullopt;
    }
    if (!found && decoded_key == key) found = decoded_value;
  }
  return found;
}

}  // namespace polybus::nsq::testing::detail
