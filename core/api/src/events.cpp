// SPDX-License-Identifier: Apache-2.0
#include "polybus/events.hpp"

namespace polybus {

const char* to_string(ConnectionState state) noexcept {
  switch (state) {
    case ConnectionState::connecting:
      return "connecting";
    case ConnectionState::connected:
      return "connected";
    case ConnectionState::disconnected:
      return "disconnected";
    case ConnectionState::reconnecting:
      return "reconnecting";
    case ConnectionState::closed:
      return "closed";
  }
  return "unknown";
}

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "unknown";
}

}  // namespace polybus
