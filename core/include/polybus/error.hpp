// Errors shared by every adapter. Protocol adapters add their own categories (nsq, figg, ...);
// these are the conditions the abstraction itself reports.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace polybus {

enum class errc {
  success = 0,
  timeout = 1,            // the operation's deadline passed
  closed,                 // the client is closed or closing
  not_supported,          // the adapter cannot do this (see capabilities())
  invalid_argument,       // a caller-supplied value was rejected
  invalid_url,            // the URL could not be parsed
  unknown_scheme,         // no adapter is registered for the URL's scheme
  invalid_option,         // an option key or value was rejected
  disconnected,           // the connection dropped while the operation was pending
  connect_failed,         // no broker could be reached
  protocol_error,         // the peer sent something the codec rejects
  frame_too_large,        // a length read from the wire is over the configured bound
  already_responded,      // ack/nack/reply on a message that already got its response
  already_subscribed,     // a second subscription where the protocol allows one
  handler_failed,         // a serve() handler threw; the requester gets this
  no_responder,           // request() found nobody serving the topic
  would_block_io_thread,  // a blocking call was made from the client's own io thread
  broker_error,           // the broker refused the operation
  canceled,               // the subscription or operation was cancelled by the caller
  tls_error,              // TLS set-up or handshake failed
  limit_exceeded,         // the peer pushed the client past a budget limit (see budget.hpp)
};

const std::error_category& core_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), core_category()};
}

// Thrown only where the caller cannot go on: connect() with a bad URL or option, programming
// errors such as an unknown option name in an adapter's own table.
class Error : public std::system_error {
 public:
  Error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
};

}  // namespace polybus

template <>
struct std::is_error_code_enum<polybus::errc> : std::true_type {};
