// SPDX-License-Identifier: Apache-2.0
// The outcome of an operation: a code, portable through polybus::errc, and its cause in words
// (what happened and where: the endpoint, the frame, the server's text, the limit and the value).
//
// A Status converts to std::error_code, so a completion written as [](std::error_code ec) {...}
// still works; take a Status to have the cause as well.
#pragma once

#include "polybus/export.hpp"

#include <iosfwd>
#include <string>
#include <system_error>
#include <utility>

#include "polybus/error.hpp"

namespace polybus {

/// The outcome of an operation: an error code (empty on success) and its cause in words.
class POLYBUS_API Status {
 public:
  /// Success.
  Status() = default;
  /// A failure with `code` (success if the code is empty), and what caused it.
  Status(std::error_code code, std::string cause = {}) : code_(code), cause_(std::move(cause)) {}
  /// A failure with a polybus::errc, and what caused it.
  Status(errc e, std::string cause = {}) : Status(make_error_code(e), std::move(cause)) {}

  /// The error code; empty on success.
  const std::error_code& code() const noexcept { return code_; }
  /// What happened and where; empty on success and where nothing more is known than the code.
  const std::string& cause() const noexcept { return cause_; }
  /// The code's message, then the cause: "could not connect: 127.0.0.1:1: Connection refused".
  std::string message() const {
    if (cause_.empty()) return code_.message();
    return code_.message() + ": " + cause_;
  }
  /// The code's value, as std::error_code::value().
  int value() const noexcept { return code_.value(); }
  /// The code's category, as std::error_code::category().
  const std::error_category& category() const noexcept { return code_.category(); }

  /// True for a failure, as a std::error_code.
  explicit operator bool() const noexcept { return static_cast<bool>(code_); }
  /// The code, so a Status goes where a std::error_code is expected.
  operator const std::error_code&() const noexcept { return code_; }

  /// Compares the code with `c` exactly (same category and value), as std::error_code does.
  friend bool operator==(const Status& s, const std::error_code& c) noexcept {
    return s.code_ == c;
  }
  /// Compares the code with `c` exactly (same category and value), as std::error_code does.
  friend bool operator==(const std::error_code& c, const Status& s) noexcept {
    return s.code_ == c;
  }
  /// The code differs from `c` (another category or value).
  friend bool operator!=(const Status& s, const std::error_code& c) noexcept {
    return s.code_ != c;
  }
  /// The code differs from `c` (another category or value).
  friend bool operator!=(const std::error_code& c, const Status& s) noexcept {
    return s.code_ != c;
  }
  /// Portable checks: status == polybus::errc::broker_error, status == std::errc::timed_out.
  friend bool operator==(const Status& s, const std::error_condition& c) noexcept {
    return s.code_ == c;
  }
  /// Portable checks with the condition first: polybus::errc::broker_error == status.
  friend bool operator==(const std::error_condition& c, const Status& s) noexcept {
    return s.code_ == c;
  }
  /// The code does not map onto the condition `c`.
  friend bool operator!=(const Status& s, const std::error_condition& c) noexcept {
    return !(s.code_ == c);
  }
  /// The code does not map onto the condition `c`.
  friend bool operator!=(const std::error_condition& c, const Status& s) noexcept {
    return !(s.code_ == c);
  }

 private:
  std::error_code code_;
  std::string cause_;
};

/// Writes message().
POLYBUS_API std::ostream& operator<<(std::ostream& out, const Status& status);

}  // namespace polybus
