// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <mutex>
#include <string>

#include "polybus/tools/reporting.hpp"

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

std::string generated_payload(std::uint64_t i, std::size_t size) {
  std::string payload = std::to_string(i);
  if (payload.size() < size) {
    payload.push_back(' ');
    while (payload.size() < size) payload.push_back(static_cast<char>('a' + payload.size() % 26));
  }
  return payload;
}

}  // namespace polybus::cli
