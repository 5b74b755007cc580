// SPDX-License-Identifier: Apache-2.0
#include "polybus/text/http.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "polybus/error.hpp"
#include "polybus/text/text.hpp"

namespace polybus::http {
namespace {

constexpr std::size_t kMaxChunkLine = 1024;  // a chunk size, its extensions and the CRLF
constexpr int kMaxInterimResponses = 8;      // 1xx answers before the real one

std::error_code protocol_error() {
  return make_error_code(errc::protocol_error);
}
std::error_code too_large() {
  return make_error_code(errc::frame_too_large);
}

// At most 64 bytes of what was received, printable, for an error text.
std::string excerpt(std::string_view bytes) {
  std::string out;
  for (const char c : bytes.substr(0, 64)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (byte < 0x20 || byte >= 0x7f) {
      text::append_hex_byte(out, "\\x", byte);
    } else {
      out += c;
    }
  }
  if (bytes.size() > 64) out += "...";
  return out;
}

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Whether a Connection header (a comma-separated token list, RFC 9110 7.6.1) names `token`
// (lower case): "Keep-Alive, Upgrade" names "upgrade", "closed-ish" does not name "close".
bool names_connection_token(const std::string* connection, std::string_view token) {
  if (!connection) return false;
  const std::string value = text::ascii_lower(*connection);
  std::string_view rest(value);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    if (text::trim_http_space(rest.substr(0, comma)) == token) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 426:
      return "Upgrade Required";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

int status_of(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.size() < 12 || line.compare(0, 7, "HTTP/1.") != 0 || line[7] < '0' || line[7] > '9' ||
      line[8] != ' ')
    return -1;
  int status = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return -1;
    status = status * 10 + (line[i] - '0');
  }
  if (line.size() > 12 && line[12] != ' ') return -1;  // exactly three digits
  return status >= 100 && status <= 599 ? status : -1;
}

HeadLines::Step HeadLines::take(std::string_view& bytes, std::string_view& line) {
  const std::size_t newline = bytes.find('\n');
  const std::size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
  if (head_.size() + take > max_head_) return Step::too_large;
  head_.append(bytes.data(), take);
  bytes.remove_prefix(take);
  if (newline == std::string_view::npos) return Step::need_more;
  line = without_cr(std::string_view(head_).substr(line_start_, head_.size() - line_start_ - 1));
  line_start_ = head_.size();
  return line.empty() ? Step::end : Step::line;
}

bool parse_header_line(std::string_view line, std::string& name, std::string_view& value) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 || line.front() == ' ' || line.front() == '\t')
    return false;
  name = text::ascii_lower(line.substr(0, colon));
  value = text::trim_http_space(line.substr(colon + 1));
  return true;
}

ResponseReader::ResponseReader(std::size_t max_body, std::string limit_name, std::size_t max_head)
    : max_body_(max_body), limit_name_(std::move(limit_name)), head_(max_head) {}

const std::string* ResponseReader::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers_)
    if (name == lower_name) return &value;
  return nullptr;
}

std::error_code ResponseReader::fail(std::error_code ec, std::string why) {
  state_ = State::failed;
  error_ = ec;
  why_ = std::move(why);
  return ec;
}

std::error_code ResponseReader::feed(std::string_view bytes) {
  while (!bytes.empty() && state_ != State::done && state_ != State::failed) {
    if (state_ == State::head) {
      consume_head(bytes);
    } else {
      consume_body(bytes);
    }
  }
  if (state_ == State::done && !bytes.empty()) extra_bytes_ = true;
  return state_ == State::failed ? error_ : std::error_code{};
}

bool ResponseReader::reusable() const {
  if (state_ != State::done || to_close_ || extra_bytes_) return false;
  return !names_connection_token(header("connection"), "close");
}

void ResponseReader::consume_head(std::string_view& bytes) {
  while (!bytes.empty() && state_ == State::head) {
    std::string_view line;
    const HeadLines::Step step = head_.take(bytes, line);
    if (step == HeadLines::Step::too_large) {
      fail(too_large(), "HTTP response head over " + std::to_string(head_.max_head()) + " bytes");
      return;
    }
    if (status_ == 0) {  // a stream that is not HTTP is refused at once, not after 64 KiB
      const std::string& head = head_.head();
      const std::size_t known = std::min<std::size_t>(head.size(), 5);
      if (head.compare(0, known, "HTTP/", known) != 0) {
        fail(protocol_error(), "not an HTTP response: " + excerpt(head));
        return;
      }
    }
    if (step == HeadLines::Step::need_more) return;
    if (status_ == 0) {
      status_ = status_of(line);
      if (status_ < 0) {
        fail(protocol_error(),
             "HTTP status line without a status from 100 to 599: " + excerpt(line));
        return;
      }
      continue;
    }
    if (step == HeadLines::Step::end) {
      end_of_head();
      return;
    }
    std::string name;
    std::string_view value;
    if (!parse_header_line(line, name, value)) {
      fail(protocol_error(), "HTTP header line not 'name: value': " + excerpt(line));
      return;
    }
    if (name == "content-length") {
      std::size_t length = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), length);
      if (value.empty() || parsed.ec != std::errc() || parsed.ptr != value.data() + value.size()) {
        fail(protocol_error(), "HTTP Content-Length not a number: " + excerpt(value));
        return;
      }
      if (content_length_ && *content_length_ != length) {
        fail(protocol_error(), "HTTP Content-Length given twice, differently");
        return;
      }
      if (length > max_body_) {
        fail(too_large(), "HTTP Content-Length " + std::to_string(length) + ": exceeds " +
                              limit_name_ + "=" + std::to_string(max_body_));
        return;
      }
      content_length_ = length;
    } else if (name == "transfer-encoding") {
      const std::string coding = text::ascii_lower(value);
      if (coding == "chunked") {
        chunked_ = true;
      } else if (coding != "identity") {
        fail(protocol_error(), "HTTP Transfer-Encoding '" + excerpt(value) + "' is not supported");
        return;
      }
    }
    headers_.emplace_back(std::move(name), std::string(value));
  }
}

void ResponseReader::end_of_head() {
  if (status_ < 200) {
    if (status_ == 101) {
      fail(protocol_error(), "HTTP 101 Switching Protocols where a response was due");
      return;
    }
    // An interim answer (100 Continue, 103 Early Hints): the real one follows.
    if (++interim_responses_ > kMaxInterimResponses) {
      fail(protocol_error(),
           "more than " + std::to_string(kMaxInterimResponses) + " interim HTTP 1xx responses");
      return;
    }
    head_.clear();
    status_ = 0;
    headers_.clear();
    content_length_.reset();
    chunked_ = false;
    return;
  }
  if (chunked_ && content_length_) {
    fail(protocol_error(), "HTTP response with both Content-Length and chunked Transfer-Encoding");
    return;
  }
  if (status_ == 204 || status_ == 304) {
    state_ = State::done;  // no body, whatever the headers say
  } else if (chunked_) {
    state_ = State::chunk_size;
  } else if (content_length_) {
    remaining_ = *content_length_;
    body_.reserve(remaining_);
    state_ = remaining_ == 0 ? State::done : State::length_body;
  } else {
    state_ = State::to_close;
    to_close_ = true;
  }
}

bool ResponseReader::take_line(std::string_view& bytes, std::size_t max_line) {
  const std::size_t newline = bytes.find('\n');
  const std::size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
  if (line_.size() + take > max_line) {
    fail(state_ == State::trailers ? too_large() : protocol_error(),
         state_ == State::trailers
             ? "HTTP chunk trailers over " + std::to_string(max_line) + " bytes"
             : "HTTP chunk framing line over " + std::to_string(max_line) + " bytes");
    return false;
  }
  line_.append(bytes.data(), take);
  bytes.remove_prefix(take);
  return newline != std::string_view::npos;
}

void ResponseReader::consume_body(std::string_view& bytes) {
  switch (state_) {
    case State::length_body:
    case State::chunk_data: {
      const std::size_t take = std::min(remaining_, bytes.size());
      body_.append(bytes.data(), take);
      bytes.remove_prefix(take);
      remaining_ -= take;
      if (remaining_ == 0) state_ = state_ == State::length_body ? State::done : State::chunk_end;
      return;
    }
    case State::to_close:
      if (bytes.size() > max_body_ - body_.size()) {
        fail(too_large(), "HTTP response body (read to the close) over " + limit_name_ + "=" +
                              std::to_string(max_body_) + " bytes");
        return;
      }
      body_.append(bytes.data(), bytes.size());
      bytes = {};
      return;
    case State::chunk_size: {
      if (!take_line(bytes, kMaxChunkLine)) return;
      std::string_view size_text = without_cr(std::string_view(line_).substr(0, line_.size() - 1));
      size_text = text::trim_http_space(size_text.substr(0, size_text.find(';')));
      std::size_t size = 0;
      const auto parsed =
          std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
      if (size_text.empty() || parsed.ec != std::errc() ||
          parsed.ptr != size_text.data() + size_text.size()) {
        fail(protocol_error(), "HTTP chunk size not a hex number: " + excerpt(line_));
        return;
      }
      line_.clear();
      if (size > max_body_ - body_.size()) {
        fail(too_large(), "HTTP chunked body over " + limit_name_ + "=" +
                              std::to_string(max_body_) + " bytes (a chunk of " +
                              std::to_string(size) + " after " + std::to_string(body_.size()) +
                              ")");
        return;
      }
      remaining_ = size;
      state_ = size == 0 ? State::trailers : State::chunk_data;
      return;
    }
    case State::chunk_end: {
      if (!take_line(bytes, kMaxChunkLine)) return;
      if (!without_cr(std::string_view(line_).substr(0, line_.size() - 1)).empty()) {
        fail(protocol_error(), "HTTP chunk data not followed by CRLF: " + excerpt(line_));
        return;
      }
      line_.clear();
      state_ = State::chunk_size;
      return;
    }
    case State::trailers: {
      const std::size_t max_head = head_.max_head();
      if (!take_line(bytes, max_head - std::min(max_head, trailer_bytes_))) return;
      trailer_bytes_ += line_.size();
      const bool last = without_cr(std::string_view(line_).substr(0, line_.size() - 1)).empty();
      line_.clear();
      if (last) state_ = State::done;
      return;
    }
    case State::head:
    case State::done:
    case State::failed:
      return;
  }
}

std::error_code ResponseReader::finish() {
  switch (state_) {
    case State::done:
      return {};
    case State::failed:
      return error_;
    case State::to_close:
      state_ = State::done;
      return {};
    case State::head:
      return fail(protocol_error(), head_.head().empty()
                                        ? "the connection closed before an HTTP response"
                                        : "the HTTP response was cut short in its head");
    case State::length_body:
      return fail(protocol_error(),
                  "the HTTP response was cut short: " + std::to_string(body_.size()) + " of " +
                      std::to_string(body_.size() + remaining_) + " body bytes");
    default:
      return fail(protocol_error(), "the HTTP response was cut short in its chunked body, after " +
                                        std::to_string(body_.size()) + " bytes");
  }
}

// ---- requests ----

const std::string* Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

bool Request::keep_alive() const {
  const std::string* connection = header("connection");
  if (names_connection_token(connection, "close")) return false;
  return http_1_1 || names_connection_token(connection, "keep-alive");
}

std::optional<std::string> Request::query_parameter(std::string_view key) const {
  std::string_view rest(query);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t equals = pair.find('=');
    if (pair.substr(0, equals) == key)
      return std::string(equals == std::string_view::npos ? std::string_view()
                                                          : pair.substr(equals + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

RequestReader::RequestReader(std::size_t max_head, std::size_t max_body)
    : max_body_(max_body), head_(max_head) {}

void RequestReader::next() {
  state_ = State::head;
  head_.clear();
  request_ = Request{};
}

RequestReader::Result RequestReader::feed(std::string_view input) {
  const auto refuse = [this](std::size_t consumed, int status) {
    state_ = State::failed;
    error_status_ = status;
    return Result{consumed, Status::error, status};
  };
  switch (state_) {
    case State::failed:
      return {0, Status::error, error_status_};
    case State::done:
      return {0, Status::request_ready, 0};
    case State::body: {
      const std::size_t want = *request_.content_length - request_.body.size();
      const std::size_t take = std::min(want, input.size());
      request_.body.append(input.data(), take);
      if (take < want) return {take, Status::need_more, 0};
      state_ = State::done;
      return {take, Status::request_ready, 0};
    }
    case State::head:
      break;
  }
  std::string_view rest = input;
  while (!rest.empty()) {
    std::string_view line;
    const HeadLines::Step step = head_.take(rest, line);
    const std::size_t consumed = input.size() - rest.size();
    if (step == HeadLines::Step::too_large) return refuse(consumed, 431);
    if (step == HeadLines::Step::need_more) return {consumed, Status::need_more, 0};
    if (request_.method.empty()) {  // the request line: METHOD SP target SP version, as Go reads it
      const std::size_t first = line.find(' ');
      const std::size_t second =
          first == std::string_view::npos ? first : line.find(' ', first + 1);
      if (second == std::string_view::npos || first == 0 || second == first + 1)
        return refuse(consumed, 400);
      const std::string_view version = line.substr(second + 1);
      if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse(consumed, 400);
      request_.method = std::string(line.substr(0, first));
      request_.target = std::string(line.substr(first + 1, second - first - 1));
      request_.http_1_1 = version == "HTTP/1.1";
      std::string_view target = request_.target;
      if (const std::size_t scheme = target.find("://"); scheme != std::string_view::npos) {
        const std::size_t path = target.find('/', scheme + 3);
        target = path == std::string_view::npos ? std::string_view("/") : target.substr(path);
      }
      const std::size_t question = target.find('?');
      request_.path = std::string(target.substr(0, question));
      if (question != std::string_view::npos)
        request_.query = std::string(target.substr(question + 1));
      continue;
    }
    if (step == HeadLines::Step::end) {
      if (request_.chunked) {
        state_ = State::failed;  // not read: the caller answers 411 or 501 on head_ready
        error_status_ = 501;
      } else {
        state_ = request_.content_length.value_or(0) > 0 ? State::body : State::done;
        if (state_ == State::body) request_.body.reserve(*request_.content_length);
      }
      return {consumed, Status::head_ready, 0};
    }
    std::string name;
    std::string_view value;
    if (!parse_header_line(line, name, value)) return refuse(consumed, 400);
    if (name == "content-length") {
      std::size_t length = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), length);
      if (value.empty() || value.size() > 15 || parsed.ec != std::errc() ||
          parsed.ptr != value.data() + value.size() ||
          (request_.content_length && *request_.content_length != length))
        return refuse(consumed, 400);
      if (length > max_body_) return refuse(consumed, 413);
      request_.content_length = length;
    } else if (name == "transfer-encoding" && text::ascii_lower(value) != "identity") {
      request_.chunked = true;
    }
    request_.headers.emplace_back(std::move(name), std::string(value));
  }
  return {input.size(), Status::need_more, 0};
}

}  // namespace polybus::http
