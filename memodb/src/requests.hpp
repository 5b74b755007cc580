// SPDX-License-Identifier: Apache-2.0
// Internal: the requester side of a MemoDB connection. Each request in flight has a slot and one
// exchange (JOB out, RESULT back); at most max_requests are sent at once, the rest wait in order
// up to their deadline. Everything here runs on the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "polybus/adapter/adapter.hpp"
#include "slot.hpp"

namespace polybus::memodb::detail {

class Connection;

class Requests {
 public:
  explicit Requests(Connection& connection) : connection_(connection) {}

  void request(RequestWork work);
  // Says how many requests wait (for a free slot, or in one for the connection) to the metrics.
  void count_waiting();
  // Closing: what waits fails with closed; the exchanges under way are cancelled.
  void close();
  // Whatever is left completes with closed, exactly once (the core's deadline may have won).
  void shutdown();
  bool exchanging() const;

 private:
  struct RequestSlot : Slot {
    using Slot::Slot;
    OpCompletion done;
    std::string service;
  };

  void start(RequestWork work);
  void completed(RequestSlot& slot, std::error_code ec, std::string reply, std::string detail);
  void finish(RequestSlot& slot, std::error_code ec, std::string reply, std::string detail);
  void pump();

  Connection& connection_;
  std::uint64_t next_key_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<RequestSlot>> slots_;
  std::vector<RequestSlot*> idle_;
  std::size_t active_ = 0;
  std::deque<RequestWork> waiting_;
};

}  // namespace polybus::memodb::detail
