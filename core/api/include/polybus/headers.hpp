// SPDX-License-Identifier: Apache-2.0
// Message metadata: string keys and values that travel with a message when the client's envelope
// carries them (envelope=cloudevents), the same on every broker. Small and ordered as given; a
// key is set at most once. Empty costs nothing: no allocation until the first set().
#pragma once

#include "polybus/export.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus {

/// A message's headers: keys and values in the order first set, each key at most once.
class POLYBUS_API Headers {
 public:
  using Entry = std::pair<std::string, std::string>;  ///< a key and its value

  Headers() = default;
  /// The entries in order, as set() one after another (a repeated key keeps its last value).
  Headers(std::initializer_list<Entry> entries) {
    for (const auto& [key, value] : entries) set(key, value);
  }

  /// Adds `key` with `value`, or replaces the value of a key already present (which keeps its
  /// place). Returns *this.
  Headers& set(std::string key, std::string value) {
    for (auto& entry : entries_) {
      if (entry.first == key) {
        entry.second = std::move(value);
        return *this;
      }
    }
    entries_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  /// The value of `key`, valid until the headers change; nullopt when it is not there.
  std::optional<std::string_view> get(std::string_view key) const {
    for (const auto& entry : entries_)
      if (entry.first == key) return std::string_view(entry.second);
    return std::nullopt;
  }
  /// `key` is there.
  bool contains(std::string_view key) const { return get(key).has_value(); }
  /// Removes `key`; false when it was not there.
  bool erase(std::string_view key) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.erase(it);
        return true;
      }
    }
    return false;
  }

  void reserve(std::size_t n) { entries_.reserve(n); }  ///< makes room for `n` entries
  std::size_t size() const { return entries_.size(); }  ///< how many keys there are
  bool empty() const { return entries_.empty(); }       ///< no key at all
  void clear() { entries_.clear(); }                    ///< removes every key
  /// The first entry, in the order the keys were first set.
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  /// Past the last entry.
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

  /// The same keys with the same values, in the same order.
  friend bool operator==(const Headers& a, const Headers& b) { return a.entries_ == b.entries_; }
  /// Not the same keys, values or order.
  friend bool operator!=(const Headers& a, const Headers& b) { return !(a == b); }

 private:
  std::vector<Entry> entries_;
};

}  // namespace polybus
