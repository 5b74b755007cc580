// SPDX-License-Identifier: Apache-2.0
// Internal: the check that an application keeps the rule of ConnectOptions::io_context, that the
// io_context outlives every client given it. A client's strand, timers and sockets belong to that
// io_context; used or destroyed after it, they would touch freed memory. The watch is a service
// of the io_context, so it is destroyed with it, after every handler still queued there (and
// the clients those alone kept) is gone: a client still registered then is held by the
// application, and the process ends with the rule named instead of going on into a
// use-after-free.
#pragma once

#include <asio/io_context.hpp>
#include <map>
#include <mutex>
#include <string>

namespace polybus::detail {

class ContextWatch : public asio::io_context::service {
 public:
  static asio::io_context::id id;
  explicit ContextWatch(asio::io_context& io) : asio::io_context::service(io) {}
  ~ContextWatch() override;

  // A client of this io_context, and its name for the message; gone once it is destroyed.
  void add(const void* client, std::string name);
  void remove(const void* client);

 private:
  void shutdown() override {}

  std::mutex mutex_;
  std::map<const void*, std::string> clients_;
};

}  // namespace polybus::detail
