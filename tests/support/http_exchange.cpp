// SPDX-License-Identifier: Apache-2.0
#include "http_exchange.hpp"

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <cctype>

namespace polybus::test {

std::string HttpAnswer::header(const std::string& lower_name) const {
  const auto found = headers.find(lower_name);
  return found == headers.end() ? std::string() : found->second;
}

HttpAnswer http_exchange(const std::string& address, const std::string& method,
                         const std::string& target, const std::string& body) {
  HttpAnswer answer;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  const auto colon = address.rfind(':');
  std::error_code ec;
  socket.connect({asio::ip::make_address(address.substr(0, colon)),
                  static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))},
                 ec);
  if (ec) return answer;
  std::string request =
      method + " " + target + " HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n";
  if (!(body.empty() && method == "GET")) {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  asio::write(socket, asio::buffer(request), ec);
  std::string response;
  asio::read(socket, asio::dynamic_buffer(response), ec);  // to the end of the stream
  const auto head_end = response.find("\r\n\r\n");
  if (head_end == std::string::npos || response.rfind("HTTP/1.", 0) != 0) return answer;
  answer.status = std::stoi(response.substr(9, 3));
  std::size_t line_start = response.find("\r\n") + 2;
  while (line_start < head_end) {
    const auto line_end = response.find("\r\n", line_start);
    const std::string line = response.substr(line_start, line_end - line_start);
    line_start = line_end + 2;
    const auto separator = line.find(':');
    if (separator == std::string::npos) continue;
    std::string name = line.substr(0, separator);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(separator + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    answer.headers[name] = value;
  }
  answer.body = response.substr(head_end + 4);
  return answer;
}

}  // namespace polybus::test
