// The outcome of an operation: a code, portable through polybus::errc, and its cause in words
// (what happened and where: the endpoint, the frame, the server's text, the limit and the value).
//
// A Status converts to std::error_code, so a completion written as [](std::error_code ec) {...}
// still works; take a Status to have the cause as well.
#pragma once

#include <iosfwd>
#include <string>
#include <system_error>
#include <utility>

#include "polybus/error.hpp"

namespace polybus {

class Status {
 public:
  Status() = default;
  Status(std::error_code code, std::string cause = {}) : code_(code), cause_(std::move(cause)) {}
  Status(errc e, std::string cause = {}) : Status(make_error_code(e), std::move(cause)) {}

  const std::error_code& code() const noexcept { return code_; }
  // What happened and where; empty on success and where nothing more is known than the code.
  const std::string& cause() const noexcept { return cause_; }
  // The code's message, then the cause: "could not connect: 127.0.0.1:1: Connection refused".
  std::string message() const {
    if (cause_.empty()) return code_.message();
    return code_.message() + ": " + cause_;
  }
  int value() const noexcept { return code_.value(); }
  const std::error_category& category() const noexcept { return code_.category(); }

  explicit operator bool() const noexcept { return static_cast<bool>(code_); }
  operator const std::error_code&() const noexcept { return code_; }

  friend bool operator==(const Status& s, const std::error_code& c) noexcept { return s.code_ == c; }
  friend bool operator==(const std::error_code& c, const Status& s) noexcept { return s.code_ == c; }
  friend bool operator!=(const Status& s, const std::error_code& c) noexcept { return s.code_ != c; }
  friend bool operator!=(const std::error_code& c, const Status& s) noexcept { return s.code_ != c; }
  // Portable checks: status == polybus::errc::broker_error, status == std::errc::timed_out.
  friend bool operator==(const Status& s, const std::error_condition& c) noexcept {
    return s.code_ == c;
  }
  friend bool operator==(const std::error_condition& c, const Status& s) noexcept {
    return s.code_ == c;
  }
  friend bool operator!=(const Status& s, const std::error_condition& c) noexcept {
    return !(s.code_ == c);
  }
  friend bool operator!=(const std::error_condition& c, const Status& s) noexcept {
    return !(s.code_ == c);
  }

 private:
  std::error_code code_;
  std::string cause_;
};

// Writes message().
std::ostream& operator<<(std::ostream& out, const Status& status);

}  // namespace polybus
