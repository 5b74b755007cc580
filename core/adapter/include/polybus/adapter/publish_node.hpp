// SPDX-License-Identifier: Apache-2.0
// What an adapter counts of each node it spreads publishes over (AdapterContext::publish_node):
// written on the adapter's strand, read by Client::metrics() from any thread
// (metrics::PublishNodeMetrics).
#pragma once

#include "polybus/export.hpp"

#include <atomic>
#include <cstdint>
#include <string>

namespace polybus::detail {

struct POLYBUS_API PublishNodeCells {
  enum class State : int { idle, connecting, ready, backing_off };
  explicit PublishNodeCells(std::string address) : address(std::move(address)) {}
  const std::string address;
  std::atomic<std::uint64_t> published{0}, confirmed{0}, failed{0}, pending{0};
  std::atomic<State> state{State::idle};
};

}  // namespace polybus::detail
