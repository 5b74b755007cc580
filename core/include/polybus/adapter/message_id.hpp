// A delivered message's protocol id, kept in place so that delivering a message allocates
// nothing for it: NSQ's 16 bytes (one more than std::string keeps inline) or a 64-bit number in
// decimal. Message::id() hands out a std::string, made on its first call only.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace polybus::detail {

class MessageId {
 public:
  static constexpr std::size_t kInline = 24;

  MessageId() = default;
  MessageId(const MessageId&) = delete;
  MessageId& operator=(const MessageId&) = delete;

  // Set by the adapter before the message is delivered (not once handlers may read it).
  void assign(std::string_view id) {
    if (id.size() <= kInline) {
      std::memcpy(inline_.data(), id.data(), id.size());
      size_ = static_cast<std::uint8_t>(id.size());
      longer_.clear();
    } else {
      longer_.assign(id.data(), id.size());
      size_ = kLonger;
    }
  }
  void assign_number(std::uint64_t number) {
    auto end = std::to_chars(inline_.data(), inline_.data() + inline_.size(), number).ptr;
    size_ = static_cast<std::uint8_t>(end - inline_.data());
    longer_.clear();
  }

  std::string_view view() const {
    return size_ == kLonger ? std::string_view(longer_) : std::string_view(inline_.data(), size_);
  }
  // The id as a string, made once (handlers on several threads may ask at the same time).
  const std::string& text() const {
    if (size_ == kLonger) return longer_;
    std::call_once(text_once_, [this] { text_.assign(inline_.data(), size_); });
    return text_;
  }

 private:
  static constexpr std::uint8_t kLonger = 0xff;

  std::array<char, kInline> inline_{};
  std::uint8_t size_ = 0;
  std::string longer_;
  mutable std::once_flag text_once_;
  mutable std::string text_;
};

}  // namespace polybus::detail
