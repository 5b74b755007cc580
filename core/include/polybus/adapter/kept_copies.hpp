// Copies of received bytes that a message keeps a view into: the frames a parser had to buffer
// because they straddled two reads (every other frame's bytes are views into the read chunks).
// A copy took two allocations of its own (a shared string), about once per read chunk on a
// connection that streams. Copies now share blocks of kBlockSize bytes; a block goes when the
// last view into it does, and no byte of one is written twice. A copy larger than a quarter of
// a block gets one of its own.
//
// One owner at a time (a machine, on its strand); blocks are let go from any thread.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace polybus {

class KeptCopies {
 public:
  static constexpr std::size_t kBlockSize = 16 * 1024;

  // A copy of bytes, valid while `owner` (set here) is held.
  std::string_view keep(std::string_view bytes, std::shared_ptr<const void>& owner) {
    if (bytes.size() > kBlockSize / 4) {
      auto copy = std::make_shared<const std::string>(bytes);
      owner = copy;
      return *copy;
    }
    if (!block_ || kBlockSize - used_ < bytes.size()) {
      block_.reset(new char[kBlockSize]);
      used_ = 0;
    }
    char* at = block_.get() + used_;
    if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
    used_ += bytes.size();
    owner = block_;
    return {at, bytes.size()};
  }

 private:
  std::shared_ptr<char[]> block_;
  std::size_t used_ = 0;  // bytes of block_ handed out
};

}  // namespace polybus
