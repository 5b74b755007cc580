// SPDX-License-Identifier: Apache-2.0
// The payloads of one publish: one (publish) or several (publish_batch). One payload is held in
// place, so a single publish allocates no container for it; several are held in a vector.
// Iterates like a vector of strings (raw pointers as iterators).
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace polybus {

namespace detail {
class BlockPool;
}

class POLYBUS_API Payloads {
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

// Spare memory for the payloads KeptPayload shares: the shared_ptr's one block (its counts and
// the string's header; the bytes stay where the caller's string had them). Without it each
// publish of a payload over KeptPayload::kSharedAbove allocated once. One per owner (a machine,
// a producer), used by it alone; a shared payload may be let go on any thread. At most
// kMaxSpare blocks (about 100 bytes each) stay spare on each of BlockPool's two lists: a publish
// window's worth.
class POLYBUS_API SharedPayloadBlocks {
 public:
  static constexpr std::size_t kMaxSpare = 1024;

  SharedPayloadBlocks();
  // The bytes, moved into a shared string whose block comes from the spare ones when there is
  // one. The owner's thread only.
  std::shared_ptr<const std::string> share(std::string&& bytes);

 private:
  std::shared_ptr<detail::BlockPool> blocks_;
};

// A payload an adapter keeps until the broker confirms it, to send it again after a reconnect.
// Up to kSharedAbove bytes it is kept by value and written by copy: the transport copies a
// payload that small into its own buffer anyway (Transport::kCopiedAtMost; transport.cpp checks
// that the two agree), so sharing it would cost an allocation per publish for nothing. A larger
// one is kept shared and written from the kept bytes, never copied.
class POLYBUS_API KeptPayload {
 public:
  static constexpr std::size_t kSharedAbove = 1024;

  KeptPayload() = default;
  explicit KeptPayload(std::string bytes) { assign(std::move(bytes)); }
  void assign(const std::string& bytes) { assign(std::string(bytes)); }
  void assign(std::string&& bytes) {
    if (bytes.size() > kSharedAbove)
      return share(std::make_shared<const std::string>(std::move(bytes)));
    keep_small(std::move(bytes));
  }
  // The same, a large payload shared in a block from `blocks` (no allocation once it has spare).
  void assign(std::string&& bytes, SharedPayloadBlocks& blocks) {
    if (bytes.size() > kSharedAbove) return share(blocks.share(std::move(bytes)));
    keep_small(std::move(bytes));
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
  void share(std::shared_ptr<const std::string> large) {
    large_ = std::move(large);
    small_.clear();
  }
  void keep_small(std::string&& bytes) {
    large_.reset();
    small_ = std::move(bytes);
  }

  std::string small_;
  std::shared_ptr<const std::string> large_;
};

}  // namespace polybus
