// SPDX-License-Identifier: Apache-2.0
// A responder and a requester on one URL (mem:// by default; any scheme with request_reply).
#include <iostream>

#include "polybus/all.hpp"

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  const std::string url = argc > 1 ? argv[1] : "mem://example";
  auto worker = polybus::connect(url);
  auto serving = worker.serve("upper", [](polybus::Message& m) {
    std::string text(m.payload());
    for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;  // the reply; throwing would answer with an error instead
  });
  if (auto ec = serving.wait_ready(std::chrono::seconds(10))) {
    std::cerr << "serve failed: " << ec.message() << "\n";
    return 1;
  }
  auto client = polybus::connect(url);
  auto reply = client.request_sync("upper", "shout this", std::chrono::seconds(5));
  if (reply.ec) {
    std::cerr << "request failed: " << reply.ec.message() << " " << reply.detail << "\n";
    return 1;
  }
  std::cout << reply.payload << "\n";
  return 0;
}
