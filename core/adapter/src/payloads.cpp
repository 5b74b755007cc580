// SPDX-License-Identifier: Apache-2.0
#include "polybus/adapter/payloads.hpp"

#include "block_pool.hpp"

namespace polybus {

SharedPayloadBlocks::SharedPayloadBlocks()
    : blocks_(std::make_shared<detail::BlockPool>(detail::shared_block_size<std::string>(),
                                                  kMaxSpare)) {}

std::shared_ptr<const std::string> SharedPayloadBlocks::share(std::string&& bytes) {
  return std::allocate_shared<std::string>(detail::PooledAllocator<std::string>(blocks_),
                                           std::move(bytes));
}

}  // namespace polybus
