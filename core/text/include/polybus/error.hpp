// SPDX-License-Identifier: Apache-2.0
// Portable errors. polybus::errc is an error condition: every protocol category (nsq, figg,
// quickio, memodb, nng) and the system's socket errors map their codes onto it, so portable code
// checks one failure on any broker with `ec == polybus::errc::broker_error`. The core reports its
// own failures as codes of the same category (make_error_code).
#pragma once

#include "polybus/export.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus {

/// The portable failures, one per kind of trouble whatever the broker: compare any code with them
/// (`ec == polybus::errc::timeout`). The core's own codes have these values too.
enum class errc {
  success = 0,            ///< no failure
  timeout = 1,            ///< the operation's deadline passed
  closed,                 ///< the client is closed or closing
  not_supported,          ///< the adapter cannot do this (see capabilities())
  invalid_argument,       ///< a caller-supplied value was rejected
  invalid_url,            ///< the URL could not be parsed
  unknown_scheme,         ///< no adapter is registered for the URL's scheme
  invalid_option,         ///< an option key or value was rejected
  disconnected,           ///< the connection dropped while the operation was pending
  connect_failed,         ///< no broker could be reached
  protocol_error,         ///< the peer sent something the codec rejects
  frame_too_large,        ///< a length read from the wire is over the configured bound
  already_responded,      ///< ack/nack/reply on a message that already got its response
  already_subscribed,     ///< a second subscription where the protocol allows only one
  handler_failed,         ///< a serve() handler threw; the requester gets this
  no_responder,           ///< request() found nobody serving the topic
  would_block_io_thread,  ///< a blocking call was made from the client's own io thread
  broker_error,           ///< the broker refused the operation
  canceled,               ///< the subscription or operation was cancelled by the caller
  tls_error,              ///< TLS set-up or handshake failed
  /// A configured limit was passed: the peer pushed the client past a budget (the max_* options,
  /// docs/safety.md), or max_outgoing_bytes refused a publish.
  limit_exceeded,
};

/// The category of polybus's own codes (name "polybus"), whose conditions are errc.
POLYBUS_API const std::error_category& core_category() noexcept;

/// The core's own code for `e` (of core_category()), as Status and Error make it from an errc.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), core_category()};
}
/// The portable condition `e`, which codes of every protocol category compare equal to.
inline std::error_condition make_error_condition(errc e) noexcept {
  return {static_cast<int>(e), core_category()};
}

/// The portable condition a code maps onto (errc::success for none): the system's and Asio's
/// socket errors as the abstraction names them, and for a protocol category what its
/// default_error_condition says.
POLYBUS_API errc portable_condition(const std::error_code& ec) noexcept;

namespace detail {

// Header-only, so that the sans-IO codec libraries map their codes onto it without linking the
// core.
class POLYBUS_API CoreCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "polybus"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::success:
        return "success";
      case errc::timeout:
        return "operation timed out";
      case errc::closed:
        return "client is closed";
      case errc::not_supported:
        return "operation not supported by this adapter";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::invalid_url:
        return "invalid URL";
      case errc::unknown_scheme:
        return "unknown URL scheme";
      case errc::invalid_option:
        return "invalid option";
      case errc::disconnected:
        return "disconnected";
      case errc::connect_failed:
        return "could not connect";
      case errc::protocol_error:
        return "protocol error";
      case errc::frame_too_large:
        return "frame larger than the configured maximum";
      case errc::already_responded:
        return "message already responded to";
      case errc::already_subscribed:
        return "already subscribed";
      case errc::handler_failed:
        return "handler failed";
      case errc::no_responder:
        return "no responder for the topic";
      case errc::would_block_io_thread:
        return "blocking call from the client's io thread";
      case errc::broker_error:
        return "broker refused the operation";
      case errc::canceled:
        return "canceled";
      case errc::tls_error:
        return "TLS error";
      case errc::limit_exceeded:
        return "a configured limit was exceeded";
    }
    return "unknown polybus error " + std::to_string(value);
  }
  bool equivalent(const std::error_code& code, int condition) const noexcept override {
    if (code.category() == *this) return code.value() == condition;
    return condition != 0 && portable_condition(code) == static_cast<errc>(condition);
  }
};

inline errc system_condition(int value) noexcept {
  switch (static_cast<std::errc>(value)) {
    case std::errc::connection_refused:
    case std::errc::host_unreachable:
    case std::errc::network_unreachable:
    case std::errc::network_down:
    case std::errc::address_not_available:
      return errc::connect_failed;
    case std::errc::connection_reset:
    case std::errc::connection_aborted:
    case std::errc::broken_pipe:
    case std::errc::not_connected:
      return errc::disconnected;
    case std::errc::timed_out:
      return errc::timeout;
    case std::errc::operation_canceled:
      return errc::canceled;
    default:
      return errc::success;
  }
}

}  // namespace detail

inline const std::error_category& core_category() noexcept {
  static const detail::CoreCategory category;
  return category;
}

inline errc portable_condition(const std::error_code& ec) noexcept {
  if (!ec) return errc::success;
  const std::error_category& category = ec.category();
  if (category == core_category()) return static_cast<errc>(ec.value());
  if (category == std::system_category() || category == std::generic_category())
    return detail::system_condition(ec.value());
  // Asio's own categories, by name (no Asio include here).
  const std::string_view name = category.name();
  if (name == "asio.system") return detail::system_condition(ec.value());  // errno, Asio's own
  if (name == "asio.misc") return ec.value() == 2 ? errc::disconnected : errc::success;  // eof
  if (name == "asio.netdb" || name == "asio.addrinfo") return errc::connect_failed;  // no such host
  if (name == "asio.ssl.stream") return errc::disconnected;  // truncated by the peer
  if (name == "asio.ssl") return errc::tls_error;
  const std::error_condition condition = category.default_error_condition(ec.value());
  if (condition.category() == core_category()) return static_cast<errc>(condition.value());
  return errc::success;
}

/// Thrown only where the caller cannot go on: connect() with a bad URL or option, programming
/// errors such as an unknown option name in an adapter's own table.
class POLYBUS_API Error : public std::system_error {
 public:
  /// The failure `ec`, with `what` saying what was wrong (what() adds the code's message).
  Error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
  /// The failure `e` as the core's code, with `what` saying what was wrong.
  Error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
};

}  // namespace polybus

template <>
struct std::is_error_condition_enum<polybus::errc> : std::true_type {};
