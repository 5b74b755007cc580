// SPDX-License-Identifier: Apache-2.0
// A delivered message's protocol id, kept in place so that delivering a message allocates
// nothing for it: NSQ's 16 bytes (more than libstdc++'s std::string keeps inline, 15) or a
// 64-bit number. A number is written in decimal only when the id is first read: most messages
// (Figg's offsets, QuickIO's callback numbers) are handled without anyone reading it, and the
// adapter's io thread then writes no digits. Message::id() hands out a std::string, made on its
// first call only.
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
    number_ = number;
    size_ = kNumber;
  }

  std::string_view view() const {
    if (size_ == kLonger) return text_;
    if (size_ == kNumber) return digits();
    return std::string_view(inline_.data(), size_);
  }
  // The id as a string, made once (handlers on several threads may ask at the same time).
  const std::string& text() const {
    if (size_ == kLonger) return text_;
    std::call_once(text_once_, [this] {
      const std::string_view id = view();
      text_.assign(id.data(), id.size());
    });
    return text_;
  }

 private:
  static constexpr std::uint8_t kLonger = 0xff;
  static constexpr std::uint8_t kNumber = 0xfe;

  // The number's decimal digits, written into inline_ once, by the first reader.
  std::string_view digits() const {
    std::call_once(digits_once_, [this] {
      char* end = std::to_chars(inline_.data(), inline_.data() + inline_.size(), number_).ptr;
      digits_ = static_cast<std::uint8_t>(end - inline_.data());
    });
    return std::string_view(inline_.data(), digits_);
  }

  mutable std::array<char, kInline> inline_{};  // a number's digits are written by a reader
  std::uint8_t size_ = 0;
  mutable std::uint8_t digits_ = 0;
  std::uint64_t number_ = 0;
  mutable std::once_flag digits_once_;
  mutable std::once_flag text_once_;
  mutable std::string text_;  // made by text(), or set by assign() for an id longer than kInline
};

}  // namespace polybus::detail
