// SPDX-License-Identifier: Apache-2.0
// Internal: the names of the topics a client publishes to, each kept once and shared with every
// publish to it (TopicName), so that a publish copies no topic. Any thread. Bounded: past
// kMaxNames names, or for a name over kMaxKeptLength bytes, a publish gets a name of its own.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "polybus/adapter/topic_name.hpp"

namespace polybus::detail {

class TopicNames {
 public:
  static constexpr std::size_t kMaxNames = 1000;
  static constexpr std::size_t kMaxKeptLength = 1024;

  TopicName name(std::string_view topic);

 private:
  std::mutex mutex_;
  // Each key views its own value's string, which the map's shared_ptr keeps in place.
  std::unordered_map<std::string_view, std::shared_ptr<const std::string>> names_;
};

}  // namespace polybus::detail
