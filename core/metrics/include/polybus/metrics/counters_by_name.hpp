// SPDX-License-Identifier: Apache-2.0
// Counters kept per name that a peer chooses (a topic, a path, a service), for metrics: a peer
// may name any number of them, so past a bound the rest are counted together under "_other".
// Not thread-safe: the owner's thread or lock guards it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace polybus {

template <typename Counters>
class CountersByName {
 public:
  static constexpr std::size_t kDefaultMaxNames = 1000;
  static constexpr std::string_view kOther = "_other";

  explicit CountersByName(std::size_t max_names = kDefaultMaxNames) : max_names_(max_names) {}

  // The counters of `name`, or of "_other" once max_names are taken (the last room is its).
  Counters& operator[](std::string_view name) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    const bool full = by_name_.size() + 1 >= max_names_;
    return by_name_[std::string(full ? kOther : name)];
  }

  // Sorted by name.
  const std::map<std::string, Counters, std::less<>>& all() const { return by_name_; }
  void clear() { by_name_.clear(); }

 private:
  std::size_t max_names_;
  std::map<std::string, Counters, std::less<>> by_name_;
};

}  // namespace polybus
