// SPDX-License-Identifier: Apache-2.0
#include "polybus/io/kept_copies.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "block_pool.hpp"
#include "polybus/io/transport.hpp"

namespace polybus {

KeptCopies::KeptCopies()
    : states_(std::make_shared<detail::BlockPool>(detail::shared_block_size<ReadChunk>(),
                                                  kSizes * (kSpareBytes / kBlockSize))) {}

KeptCopies::~KeptCopies() = default;

std::shared_ptr<char> KeptCopies::fresh_block(std::size_t size_index) {
  auto& bytes = bytes_[size_index];
  const std::size_t size = kBlockSize << size_index;
  if (!bytes)
    bytes = std::make_shared<detail::BlockPool>(size, std::max<std::size_t>(1, kSpareBytes / size));
  // A read chunk is such a block: bytes from a pool, given back when the last view goes.
  auto chunk =
      std::allocate_shared<ReadChunk>(detail::PooledAllocator<ReadChunk>(states_), size, bytes);
  char* at = chunk->data.get();
  return std::shared_ptr<char>(std::move(chunk), at);
}

std::string_view KeptCopies::keep(std::string_view bytes, std::shared_ptr<const void>& owner) {
  if (bytes.size() > kLargestSpared) {
    auto copy = std::make_shared<const std::string>(bytes);
    owner = copy;
    return *copy;
  }
  if (bytes.size() > kBlockSize / 4) {
    std::size_t size_index = 0;
    while ((kBlockSize << size_index) < bytes.size()) ++size_index;
    auto own = fresh_block(size_index);
    std::memcpy(own.get(), bytes.data(), bytes.size());
    owner = own;
    return {own.get(), bytes.size()};
  }
  if (!block_ || kBlockSize - used_ < bytes.size()) {
    block_ = fresh_block(0);
    used_ = 0;
  }
  char* at = block_.get() + used_;
  if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
  used_ += bytes.size();
  owner = block_;
  return {at, bytes.size()};
}

}  // namespace polybus
