// SPDX-License-Identifier: Apache-2.0
// A delivered message's protocol id, kept in place so that delivering a message allocates
// nothing for it: NSQ's 16 bytes (more than libstdc++'s std::string keeps inline, 15) or a
// 64-bit number in decimal. Message::id() hands out a std::string, made on its first call only.
#pragma once

#include "polybus/export.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace polybus::detail {

class POLYBUS_API MessageId {
 public:
  static constexpr std::size_t kInline = 24;

  MessageId() = default;
  MessageId(const MessageId&) = delete;
  MessageId& operator=(const MessageId&) = delete;

  // Set by the adapter before the message is delivered (not once handlers may read it).
  void assign(std::string_view id) {
    if (id.size() > kInline) {  // none of our protocols sends one: kept as the string itself
      text_.assign(id.data(), id.size());
      size_ = kLonger;
      return;
    }
    if (!id.empty()) std::memcpy(inline_.data(), id.data(), id.size());
    size_ = static_cast<std::uint8_t>(id.size());
  }
  void assign_number(std::uint64_t number) {
    auto end = std::to_chars(inline_.data(), inline_.data() + inline_.size(), number).ptr;
    size_ = static_cast<std::uint8_t>(end - inline_.data());
  }

  std::string_view view() const {
    return size_ == kLonger ? std::string_view(text_) : std::string_view(inline_.data(), size_);
  }
  // The id as a string, made once (handlers on several threads may ask at the same time).
  const std::string& text() const {
    if (size_ == kLonger) return text_;
    std::call_once(text_once_, [this] { text_.assign(inline_.data(), size_); });
    return text_;
  }

 private:
  static constexpr std::uint8_t kLonger = 0xff;

  std::array<char, kInline> inline_{};
  std::uint8_t size_ = 0;
  mutable std::once_flag text_once_;
  mutable std::string text_;  // made by text(), or set by assign() for an id longer than kInline
};

}  // namespace polybus::detail
