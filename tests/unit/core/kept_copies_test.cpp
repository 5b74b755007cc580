// SPDX-License-Identifier: Apache-2.0
// KeptCopies: copies of straddled frames share blocks, stay valid while their owner is held, and
// are never written over.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "polybus/io/kept_copies.hpp"
#include "polybus/tools/allocation_counter.hpp"

using polybus::KeptCopies;

TEST_CASE("kept copies: small copies share a block and outlive the keeper", "[kept_copies]") {
  std::shared_ptr<const void> first_owner, second_owner;
  std::string_view first, second;
  {
    KeptCopies kept;
    std::string bytes = "first frame";
    first = kept.keep(bytes, first_owner);
    bytes = "second";
    second = kept.keep(bytes, second_owner);
    bytes.assign(bytes.size(), '#');  // the caller's buffer is overwritten
    CHECK(first_owner == second_owner);
    CHECK(second.data() == first.data() + first.size());
  }
  CHECK(first == "first frame");
  CHECK(second == "second");
  CHECK(first_owner.use_count() == 2);
}

TEST_CASE("kept copies: a full block gives way, and what it holds stays as it was",
          "[kept_copies]") {
  KeptCopies kept;
  const std::size_t size = KeptCopies::kBlockSize / 8;
  std::vector<std::shared_ptr<const void>> owners;
  std::vector<std::string_view> views;
  for (int i = 0; i < 20; ++i) {
    const std::string bytes(size, static_cast<char>('a' + i));
    owners.emplace_back();
    views.push_back(kept.keep(bytes, owners.back()));
  }
  // 8 copies to a block: 20 copies in 3 blocks.
  CHECK(owners[0] == owners[7]);
  CHECK(owners[7] != owners[8]);
  CHECK(owners[8] == owners[15]);
  CHECK(owners[15] != owners[16]);
  for (int i = 0; i < 20; ++i) CHECK(views[i] == std::string(size, static_cast<char>('a' + i)));
}

TEST_CASE("kept copies: a large copy gets its own owner, an empty one is valid", "[kept_copies]") {
  KeptCopies kept;
  std::shared_ptr<const void> small_owner, large_owner, empty_owner;
  kept.keep("small", small_owner);
  const std::string large(KeptCopies::kBlockSize / 4 + 1, 'L');
  const std::string_view view = kept.keep(large, large_owner);
  CHECK(view == large);
  CHECK(view.data() != large.data());
  CHECK(large_owner != small_owner);
  CHECK(kept.keep({}, empty_owner).empty());
  CHECK(empty_owner);
}

TEST_CASE("kept copies: large copies reuse spare blocks, never one still held", "[kept_copies]") {
  // A stream of large messages, each straddling two reads: every one is copied. Once blocks
  // are spare, copying allocates nothing; a block still viewed is never written over.
  KeptCopies kept;
  const std::size_t size = 40 * 1024;  // a 64 KiB block each
  std::vector<std::string> frames;
  for (char c : {'a', 'b', 'c'}) frames.emplace_back(size, c);
  std::shared_ptr<const void> held_owner;
  const std::string_view held = kept.keep(frames[0], held_owner);  // a handler keeps this one
  for (int warm = 0; warm < 2; ++warm) {
    std::shared_ptr<const void> owner;
    kept.keep(frames[1], owner);
  }
  const auto before = polybus::cli::allocations_on_this_thread();
  for (int i = 0; i < 100; ++i) {
    std::shared_ptr<const void> owner;
    const std::string_view view = kept.keep(frames[1 + i % 2], owner);
    CHECK(view == frames[1 + i % 2]);
    CHECK(owner != held_owner);
  }
  CHECK(polybus::cli::allocations_on_this_thread() - before == 0);
  CHECK(held == frames[0]);
  // Let go on another thread, the block comes back to be used again.
  const void* const block = held.data();
  std::thread([owner = std::move(held_owner)]() mutable { owner.reset(); }).join();
  bool reused = false;
  for (int i = 0; i < 4 && !reused; ++i) {
    std::shared_ptr<const void> owner;
    reused = kept.keep(frames[1], owner).data() == block;
  }
  CHECK(reused);
}

TEST_CASE("kept copies: a copy over the largest spared size is the heap's, and stays whole",
          "[kept_copies]") {
  KeptCopies kept;
  const std::string huge(KeptCopies::kLargestSpared + 1, 'H');
  std::shared_ptr<const void> owner;
  const std::string_view view = kept.keep(huge, owner);
  CHECK(view == huge);
  CHECK(view.data() != huge.data());
  // And one at the largest spared size fits its block exactly.
  const std::string largest(KeptCopies::kLargestSpared, 'M');
  std::shared_ptr<const void> largest_owner;
  CHECK(kept.keep(largest, largest_owner) == largest);
}
