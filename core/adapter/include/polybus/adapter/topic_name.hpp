// SPDX-License-Identifier: Apache-2.0
// For adapters: a publish's topic as the core hands it over (PublishWork::topic), the client's one
// copy of that topic's name, shared. Handing it on, and keeping it until the broker confirms the
// publish, copies nothing: a std::string per publish would allocate for every topic longer than
// a string's inline storage (15 bytes with libstdc++). It reads as the const std::string it holds.
#pragma once

#include "polybus/export.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace polybus {

class POLYBUS_API TopicName {
 public:
  TopicName() = default;
  explicit TopicName(std::shared_ptr<const std::string> name) : name_(std::move(name)) {}
  // A name of its own (an adapter's tests; the core past its bound of kept names).
  TopicName(std::string name)  // NOLINT: a string is a name
      : name_(std::make_shared<const std::string>(std::move(name))) {}
  TopicName(const char* name) : TopicName(std::string(name)) {}  // NOLINT: the same

  const std::string& str() const { return name_ ? *name_ : none(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as it
  operator std::string_view() const { return str(); }    // NOLINT: the same
  std::size_t size() const { return str().size(); }
  bool empty() const { return str().empty(); }
  // The shared string itself (null for an empty name), for what keeps it beyond the publish.
  const std::shared_ptr<const std::string>& shared() const { return name_; }

  friend bool operator==(const TopicName& a, const TopicName& b) {
    return a.name_ == b.name_ || a.str() == b.str();
  }
  friend bool operator!=(const TopicName& a, const TopicName& b) { return !(a == b); }

 private:
  static const std::string& none() {
    static const std::string empty;
    return empty;
  }
  std::shared_ptr<const std::string> name_;
};

}  // namespace polybus
