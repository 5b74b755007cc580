#include "polybus/adapter/http.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "polybus/adapter/text.hpp"
#include "polybus/error.hpp"

namespace polybus::http {
namespace {

constexpr std::size_t kMaxChunkLine = 1024;  // a chunk size, its extensions and the CRLF
constexpr int kMaxInterimResponses = 8;      // 1xx answers before the real one

std::error_code protocol_error() { return make_error_code(errc::protocol_error); }
std::error_code too_large() { return make_error_code(errc::frame_too_large); }

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

}  // namespace

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

ResponseReader::ResponseReader(std::size_t max_body, std::string limit_name, std::size_t max_head)
    : max_body_(max_body), limit_name_(std::move(limit_name)), max_head_(max_head) {}

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
  return state_ == State::failed ? error_ : std::error_code{};
}

void ResponseReader::consume_head(std::string_view& bytes) {
  // Line by line, so that the head holds the head only, a bad status line is refused as soon
  // as it ends, and a head dripped a byte at a time costs linear time.
  while (!bytes.empty() && state_ == State::head) {
    const std::size_t newline = bytes.find('\n');
    const std::size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
    if (head_.size() + take > max_head_) {
      fail(too_large(), "HTTP response head over " + std::to_string(max_head_) + " bytes");
      return;
    }
    head_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (line_start_ == 0) {
      const std::size_t known = std::min<std::size_t>(head_.size(), 5);
      if (head_.compare(0, known, "HTTP/", known) != 0) {
        fail(protocol_error(), "not an HTTP response: " + excerpt(head_));
        return;
      }
    }
    if (newline == std::string_view::npos) return;
    const std::string_view line =
        without_cr(std::string_view(head_).substr(line_start_, head_.size() - line_start_ - 1));
    if (line_start_ == 0) {
      status_ = status_of(line);
      if (status_ < 0) {
        fail(protocol_error(), "HTTP status line without a status from 100 to 599: " + excerpt(line));
        return;
      }
    } else if (line.empty()) {
      parse_head();
      return;
    }
    line_start_ = head_.size();
  }
}

void ResponseReader::parse_head() {
  headers_.clear();
  std::string_view rest(head_);
  rest.remove_prefix(rest.find('\n') + 1);  // past the status line
  std::optional<std::size_t> content_length;
  bool chunked = false;
  while (true) {
    const std::size_t newline = rest.find('\n');
    const std::string_view line = without_cr(rest.substr(0, newline));
    rest.remove_prefix(newline + 1);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line.front() == ' ' || line.front() == '\t') {
      fail(protocol_error(), "HTTP header line not 'name: value': " + excerpt(line));
      return;
    }
    std::string name = text::ascii_lower(line.substr(0, colon));
    const std::string_view value = text::trim_http_space(line.substr(colon + 1));
    if (name == "content-length") {
      std::size_t length = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), length);
      if (value.empty() || parsed.ec != std::errc() || parsed.ptr != value.data() + value.size()) {
        fail(protocol_error(), "HTTP Content-Length not a number: " + excerpt(value));
        return;
      }
      if (content_length && *content_length != length) {
        fail(protocol_error(), "HTTP Content-Length given twice, differently");
        return;
      }
      if (length > max_body_) {
        fail(too_large(), "HTTP Content-Length " + std::to_string(length) + ": exceeds " +
                              limit_name_ + "=" + std::to_string(max_body_));
        return;
      }
      content_length = length;
    } else if (name == "transfer-encoding") {
      const std::string coding = text::ascii_lower(value);
      if (coding == "chunked") {
        chunked = true;
      } else if (coding != "identity") {
        fail(protocol_error(), "HTTP Transfer-Encoding '" + excerpt(value) + "' is not supported");
        return;
      }
    }
    headers_.emplace_back(std::move(name), std::string(value));
  }
  if (status_ < 200) {
    if (status_ == 101) {
      fail(protocol_error(), "HTTP 101 Switching Protocols where a response was due");
      return;
    }
    // An interim answer (100 Continue, 103 Early Hints): the real one follows.
    if (++interim_responses_ > kMaxInterimResponses) {
      fail(protocol_error(), "more than " + std::to_string(kMaxInterimResponses) +
                                 " interim HTTP 1xx responses");
      return;
    }
    head_.clear();
    line_start_ = 0;
    status_ = 0;
    headers_.clear();
    return;
  }
  if (chunked && content_length) {
    fail(protocol_error(), "HTTP response with both Content-Length and chunked Transfer-Encoding");
    return;
  }
  if (status_ == 204 || status_ == 304) {
    state_ = State::done;  // no body, whatever the headers say
  } else if (chunked) {
    state_ = State::chunk_size;
  } else if (content_length) {
    remaining_ = *content_length;
    body_.reserve(remaining_);
    state_ = remaining_ == 0 ? State::done : State::length_body;
  } else {
    state_ = State::to_close;
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
                              std::to_string(size) + " after " + std::to_string(body_.size()) + ")");
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
      if (!take_line(bytes, max_head_ - std::min(max_head_, trailer_bytes_))) return;
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
      return fail(protocol_error(), head_.empty() ? "the connection closed before an HTTP response"
                                                  : "the HTTP response was cut short in its head");
    case State::length_body:
      return fail(protocol_error(), "the HTTP response was cut short: " +
                                        std::to_string(body_.size()) + " of " +
                                        std::to_string(body_.size() + remaining_) + " body bytes");
    default:
      return fail(protocol_error(), "the HTTP response was cut short in its chunked body, after " +
                                        std::to_string(body_.size()) + " bytes");
  }
}

}  // namespace polybus::http
