// Message metadata: string keys and values that travel with a message when the client's envelope
// carries them (envelope=cloudevents), the same on every broker. Small and ordered as given; a
// key is set at most once. Empty costs nothing: no allocation until the first set().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus {

class Headers {
 public:
  using Entry = std::pair<std::string, std::string>;

  Headers() = default;
  Headers(std::initializer_list<Entry> entries) {
    for (const auto& [key, value] : entries) set(key, value);
  }

  // Replaces the value of a key already present.
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
  std::optional<std::string_view> get(std::string_view key) const {
    for (const auto& entry : entries_)
      if (entry.first == key) return std::string_view(entry.second);
    return std::nullopt;
  }
  bool contains(std::string_view key) const { return get(key).has_value(); }
  bool erase(std::string_view key) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.erase(it);
        return true;
      }
    }
    return false;
  }

  void reserve(std::size_t n) { entries_.reserve(n); }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

  friend bool operator==(const Headers& a, const Headers& b) { return a.entries_ == b.entries_; }
  friend bool operator!=(const Headers& a, const Headers& b) { return !(a == b); }

 private:
  std::vector<Entry> entries_;
};

}  // namespace polybus
