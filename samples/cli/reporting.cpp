// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <mutex>

#include "commands.hpp"

namespace polybus::cli {

Client connect_reporting(const std::string& url) {
  static std::mutex stderr_mutex;  // hooks run on the client's threads
  ConnectOptions options;
  options.log_level = LogLevel::warn;
  options.log = [](LogLevel, std::string_view text) {
    std::lock_guard<std::mutex> lock(stderr_mutex);
    std::cerr << "polybus: " << text << '\n';
  };
  options.on_error = [](std::error_code ec, const std::string& text) {
    std::lock_guard<std::mutex> lock(stderr_mutex);
    std::cerr << "polybus: " << ec.message() << ": " << text << '\n';
  };
  return polybus::connect(url, std::move(options));
}

}  // namespace polybus::cli
