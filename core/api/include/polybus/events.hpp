// Connection-state events, logging and statistics: hooks, so no logging library is forced on users.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus {

enum class ConnectionState { connecting, connected, disconnected, reconnecting, closed };
const char* to_string(ConnectionState state) noexcept;

struct StateEvent {
  ConnectionState state;
  std::string endpoint;   // host:port or path; empty for the client as a whole
  std::error_code reason;  // why, for disconnected/reconnecting/closed
  std::string detail;      // the cause in words: what failed, with the OS or server text
  std::chrono::milliseconds retry_in{0};  // reconnecting: the wait before the next attempt
};

enum class LogLevel { debug, info, warn, error };
const char* to_string(LogLevel level) noexcept;

using StateCallback = std::function<void(const StateEvent&)>;
// Asynchronous errors that belong to no single operation (a fatal frame, E_FIN_FAILED, a
// handler that threw): the code and a message that names what was wrong.
using ErrorCallback = std::function<void(std::error_code, const std::string&)>;
using LogSink = std::function<void(LogLevel, std::string_view)>;

struct Stats {
  std::uint64_t published = 0;       // publish operations started (a batch counts its messages)
  std::uint64_t publish_acked = 0;   // confirmed by the broker
  std::uint64_t publish_failed = 0;  // completed with an error (timeouts included)
  std::uint64_t received = 0;        // messages handed to handlers
  std::uint64_t acked = 0;
  std::uint64_t nacked = 0;
  std::uint64_t discarded = 0;       // over max_attempts
  std::uint64_t dead_lettered = 0;   // over max_attempts, published to the dead-letter topic
  // Not a valid envelope (envelope=cloudevents): delivered raw, as they came, with no headers.
  std::uint64_t delivered_raw = 0;
  std::uint64_t requests = 0;
  std::uint64_t replies = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
};

}  // namespace polybus
