// SPDX-License-Identifier: Apache-2.0
#include "topic_names.hpp"

namespace polybus::detail {

TopicName TopicNames::name(std::string_view topic) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = names_.find(topic); it != names_.end()) return TopicName(it->second);
  auto name = std::make_shared<const std::string>(topic);
  if (names_.size() < kMaxNames && topic.size() <= kMaxKeptLength) names_.emplace(*name, name);
  return TopicName(std::move(name));
}

}  // namespace polybus::detail
