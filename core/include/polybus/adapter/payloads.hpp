// The payloads of one publish: one (publish) or several (publish_batch). One payload is held in
// place, so a single publish allocates no container for it; several are held in a vector.
// Iterates like a vector of strings (raw pointers as iterators).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus {

class Payloads {
 public:
  Payloads() = default;
  explicit Payloads(std::string one) : one_(std::move(one)), single_(true) {}
  explicit Payloads(std::vector<std::string> many) : many_(std::move(many)) {}

  std::size_t size() const { return single_ ? 1 : many_.size(); }
  bool empty() const { return size() == 0; }
  std::string* begin() { return single_ ? &one_ : many_.data(); }
  std::string* end() { return begin() + size(); }
  const std::string* begin() const { return single_ ? &one_ : many_.data(); }
  const std::string* end() const { return begin() + size(); }
  std::string& operator[](std::size_t i) { return begin()[i]; }
  const std::string& operator[](std::size_t i) const { return begin()[i]; }
  std::string& front() { return *begin(); }
  const std::string& front() const { return *begin(); }

 private:
  std::string one_;
  std::vector<std::string> many_;
  bool single_ = false;
};

// A payload an adapter keeps until the broker confirms it, to send it again after a reconnect.
// Up to kSharedAbove bytes it is kept by value and written by copy: the transport copies a
// payload that small into its own buffer anyway (Transport::kCopiedAtMost; transport.cpp checks
// that the two agree), so sharing it would cost an allocation per publish for nothing. A larger
// one is kept shared and written from the kept bytes, never copied.
class KeptPayload {
 public:
  static constexpr std::size_t kSharedAbove = 1024;

  KeptPayload() = default;
  explicit KeptPayload(std::string bytes) { assign(std::move(bytes)); }
  void assign(const std::string& bytes) { assign(std::string(bytes)); }
  void assign(std::string&& bytes) {
    if (bytes.size() > kSharedAbove) {
      large_ = std::make_shared<const std::string>(std::move(bytes));
      small_.clear();
    } else {
      large_.reset();
      small_ = std::move(bytes);
    }
  }

  std::string_view view() const {
    return large_ ? std::string_view(*large_) : std::string_view(small_);
  }
  std::size_t size() const { return view().size(); }
  bool empty() const { return size() == 0; }
  // Set when the payload is kept shared: write these bytes without copying them. Null when it is
  // kept by value: copy view().
  const std::shared_ptr<const std::string>& shared() const { return large_; }

 private:
  std::string small_;
  std::shared_ptr<const std::string> large_;
};

}  // namespace polybus
