// SPDX-License-Identifier: Apache-2.0
// Copies of received bytes that a message keeps a view into: the frames a parser had to buffer
// because they straddled two reads (every other frame's bytes are views into the read chunks).
// A copy took two allocations of its own (a shared string), about once per read chunk on a
// connection that streams. Copies now share blocks of kBlockSize bytes; a block goes when the
// last view into it does, and no byte of one is written twice. A copy larger than a quarter of
// a block gets a block of its own, of the smallest size of kBlockSize times a power of two that
// holds it, up to kLargestSpared; larger copies get the heap's.
//
// Blocks go back to spare ones of their size, not to the heap, so that a stream of large
// messages (each straddling two reads) allocates nothing once they are there. Spare blocks of
// each size wait on two lists (BlockPool's: the owner's, and those given back since it last
// looked), each holding kSpareBytes of them or one block where a block is larger: at most
// 5.5 MiB in all, and only after copies of every size.
//
// One owner at a time (a machine, on its strand); blocks are let go from any thread.
#pragma once

#include "polybus/export.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <string_view>

namespace polybus {

namespace detail {
class BlockPool;
}

class POLYBUS_API KeptCopies {
 public:
  static constexpr std::size_t kBlockSize = 16 * 1024;
  static constexpr std::size_t kLargestSpared = 1024 * 1024;
  static constexpr std::size_t kSpareBytes = 256 * 1024;

  KeptCopies();
  ~KeptCopies();
  KeptCopies(const KeptCopies&) = delete;
  KeptCopies& operator=(const KeptCopies&) = delete;

  // A copy of bytes, valid while `owner` (set here) is held.
  std::string_view keep(std::string_view bytes, std::shared_ptr<const void>& owner);

 private:
  static constexpr std::size_t kSizes = 7;  // kBlockSize << 0 .. 6: 16 KiB to kLargestSpared
  static_assert((kBlockSize << (kSizes - 1)) == kLargestSpared);

  // A block of kBlockSize << size_index bytes, from the spare ones of its size when there is one.
  std::shared_ptr<char> fresh_block(std::size_t size_index);

  std::shared_ptr<detail::BlockPool> states_;                     // the blocks' shared states
  std::array<std::shared_ptr<detail::BlockPool>, kSizes> bytes_;  // made when first needed
  std::shared_ptr<char> block_;  // the block small copies go into now
  std::size_t used_ = 0;         // bytes of block_ handed out
};

}  // namespace polybus
