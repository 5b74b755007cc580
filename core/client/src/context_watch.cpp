// SPDX-License-Identifier: Apache-2.0
#include "context_watch.hpp"

#include <cstdio>
#include <cstdlib>

namespace polybus::detail {

asio::io_context::id ContextWatch::id;

ContextWatch::~ContextWatch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (clients_.empty()) return;
  std::string names;
  for (const auto& [client, name] : clients_) names += (names.empty() ? "" : ", ") + name;
  std::fprintf(stderr,
               "polybus: the asio::io_context given in ConnectOptions::io_context was destroyed "
               "while client(s) %s still existed (a Client, or a Subscription or Message of "
               "one): their strands, timers and sockets belong to that io_context. Destroy "
               "every handle of a client before its io_context (declare the io_context first). "
               "Ending the process instead of using freed memory.\n",
               names.c_str());
  std::abort();
}

void ContextWatch::add(const void* client, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  clients_.emplace(client, std::move(name));
}

void ContextWatch::remove(const void* client) {
  std::lock_guard<std::mutex> lock(mutex_);
  clients_.erase(client);
}

}  // namespace polybus::detail
