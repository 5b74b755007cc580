// SPDX-License-Identifier: Apache-2.0
// Connection-state events, logging and statistics: hooks, so no logging library is forced on users.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus {

/// The state of one connection to a broker. The client as a whole reports closed, once, last.
enum class ConnectionState {
  connecting,    ///< an attempt to connect started
  connected,     ///< the connection is up
  disconnected,  ///< the connection was lost or refused; StateEvent::reason says why
  reconnecting,  ///< another attempt follows after StateEvent::retry_in
  closed,        ///< closed for good, by close()
};
/// The state's name: "connecting", "connected", ...
POLYBUS_API const char* to_string(ConnectionState state) noexcept;

/// A change of a connection's state, as ConnectOptions::on_state is told of it.
struct POLYBUS_API StateEvent {
  ConnectionState state;   ///< the state the connection is in now
  std::string endpoint;    ///< host:port or path; empty for the client as a whole
  std::error_code reason;  ///< why, for disconnected/reconnecting/closed
  std::string detail;      ///< the cause in words: what failed, with the OS or server text
  std::chrono::milliseconds retry_in{0};  ///< reconnecting: the wait before the next attempt
};

/// How much a log line matters, least first.
enum class LogLevel {
  debug,  ///< details for finding a problem
  info,   ///< state changes: connections made and closed
  warn,   ///< a failure the client goes on after: a lost connection, a discarded message
  error,  ///< something the client or its adapter failed at unexpectedly
};
/// The level's name: "debug", "info", "warn" or "error".
POLYBUS_API const char* to_string(LogLevel level) noexcept;

/// Told of each StateEvent, on the client's strand, one at a time with the error callback and the
/// log; what it throws is reported through the error callback.
using StateCallback = std::function<void(const StateEvent&)>;
/// Asynchronous errors that belong to no single operation (a fatal frame, E_FIN_FAILED, a
/// handler that threw): the code and a message that names what was wrong. On the client's
/// strand, one at a time with the state callback and the log, whatever thread the error came
/// from; what it throws goes to the log.
using ErrorCallback = std::function<void(std::error_code, const std::string&)>;
/// Takes the client's log lines, each with its level, on the client's strand, one at a time with
/// the state and error callbacks; what it throws is dropped.
using LogSink = std::function<void(LogLevel, std::string_view)>;

/// A client's counters since it was connected (Client::stats()).
struct POLYBUS_API Stats {
  std::uint64_t published = 0;       ///< publish operations started (a batch counts its messages)
  std::uint64_t publish_acked = 0;   ///< confirmed by the broker
  std::uint64_t publish_failed = 0;  ///< completed with an error (timeouts included)
  std::uint64_t received = 0;        ///< messages handed to handlers
  std::uint64_t acked = 0;           ///< messages acknowledged
  std::uint64_t nacked = 0;          ///< messages given back for redelivery
  std::uint64_t discarded = 0;       ///< over max_attempts
  std::uint64_t dead_lettered = 0;   ///< over max_attempts, published to the dead-letter topic
  /// Not a valid envelope (envelope=cloudevents): delivered raw, as they came, with no headers.
  std::uint64_t delivered_raw = 0;
  std::uint64_t requests = 0;    ///< requests made (refused ones included)
  std::uint64_t replies = 0;     ///< requests that got a reply
  std::uint64_t reconnects = 0;  ///< connections made again after one was lost
  std::uint64_t bytes_in = 0;    ///< bytes read from brokers
  std::uint64_t bytes_out = 0;   ///< bytes written to brokers
};

}  // namespace polybus
