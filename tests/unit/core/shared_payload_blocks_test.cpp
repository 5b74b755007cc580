// SPDX-License-Identifier: Apache-2.0
// SharedPayloadBlocks and KeptPayload: a large payload is kept shared without its bytes being
// copied, and once blocks are spare, keeping one allocates nothing, wherever it is let go.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "polybus/adapter/payloads.hpp"
#include "polybus/tools/allocation_counter.hpp"

using polybus::KeptPayload;
using polybus::SharedPayloadBlocks;
using polybus::cli::allocations_on_this_thread;

TEST_CASE("shared payload blocks: a large payload is shared, not copied", "[payloads]") {
  SharedPayloadBlocks blocks;
  std::string bytes(KeptPayload::kSharedAbove + 1, 'L');
  const char* const where = bytes.data();
  KeptPayload kept;
  kept.assign(std::move(bytes), blocks);
  REQUIRE(kept.shared());
  CHECK(kept.shared()->data() == where);  // the caller's bytes, moved
  CHECK(kept.view() == std::string(KeptPayload::kSharedAbove + 1, 'L'));
  // A small one after it is kept by value: the shared one is let go.
  kept.assign(std::string(KeptPayload::kSharedAbove, 's'), blocks);
  CHECK_FALSE(kept.shared());
  CHECK(kept.size() == KeptPayload::kSharedAbove);
}

TEST_CASE("shared payload blocks: a window of large payloads allocates nothing once warm",
          "[payloads]") {
  SharedPayloadBlocks blocks;
  constexpr std::size_t kWindow = 256;
  std::vector<KeptPayload> ring(kWindow);
  std::vector<std::string> payloads(kWindow);
  auto refill = [&] {  // the caller's payloads, made before counting: theirs, not the keeper's
    for (auto& payload : payloads) payload.assign(2048, 'p');
  };
  auto keep_all = [&] {
    for (std::size_t i = 0; i < kWindow; ++i) ring[i].assign(std::move(payloads[i]), blocks);
  };
  refill();
  keep_all();  // a block per payload
  // The next window while a transport still holds the last one: a block each again.
  refill();
  std::vector<std::shared_ptr<const std::string>> written;
  for (auto& kept : ring) written.push_back(kept.shared());
  auto before = allocations_on_this_thread();
  keep_all();
  CHECK(allocations_on_this_thread() - before == kWindow);
  // Let go on another thread, as a transport's write or a handler might: the blocks come back.
  std::thread([&] { written.clear(); }).join();
  refill();
  before = allocations_on_this_thread();
  keep_all();
  CHECK(allocations_on_this_thread() - before == 0);
}
