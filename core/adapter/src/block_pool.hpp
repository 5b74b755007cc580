// SPDX-License-Identifier: Apache-2.0
// Internal: spare memory for the objects a client makes once per message (a delivered message's
// state, a publish's operation), so that steady traffic allocates nothing. They are made on the
// client's strand and freed on any thread: a delivered message dies wherever its handler lets it
// go. The strand takes blocks from a list of its own, without a lock or an atomic; a block freed
// on the strand goes back to that list, one freed elsewhere onto a second list with one
// compare-exchange, which the strand takes whole when its own runs dry. About max_spare blocks at
// most stay spare on each list (a give that races the strand taking the list is not counted);
// the rest go back to the heap.
//
// A pool made without a strand serves one owner that takes (a machine, a keeper of copies,
// never two threads at once): its takes need no check, and every block comes back through the
// compare-exchange list.
//
// Why not a mutex-guarded free list: one was measured (docs/performance.md, "Tried and not
// kept"); its lock, taken by the io thread and the handler threads in turn, cost more than
// glibc's malloc.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "polybus/adapter/adapter.hpp"

namespace polybus::detail {

class BlockPool {
 public:
  // Blocks of block_size bytes (at least a pointer's: a spare block holds the list's link),
  // aligned for any object (operator new's alignment).
  BlockPool(Strand strand, std::size_t block_size, std::size_t max_spare)
      : strand_(std::move(strand)), block_size_(linkable(block_size)), max_spare_(max_spare) {}
  // For one owner: take() only from it, give() from anywhere.
  BlockPool(std::size_t block_size, std::size_t max_spare)
      : block_size_(linkable(block_size)), max_spare_(max_spare) {}
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  std::size_t block_size() const { return block_size_; }
  // Any thread; off the strand it is operator new. Without a strand: the owner only.
  void* take();
  // Any thread: a block from take().
  void give(void* block) noexcept;
  // The spare blocks the strand holds now (its own list only; for tests).
  std::size_t spare() const { return spare_count_; }

 private:
  struct Node {
    Node* next;
  };
  static constexpr std::size_t linkable(std::size_t size) {
    return size < sizeof(Node) ? sizeof(Node) : size;
  }
  void collect_returned();
  void push_spare(Node* node) noexcept;

  const std::optional<Strand> strand_;  // none: one owner takes
  const std::size_t block_size_;
  const std::size_t max_spare_;
  Node* spare_ = nullptr;  // the strand's own
  std::size_t spare_count_ = 0;
  // Given back off the strand; on a cache line of its own, away from the strand's fields.
  alignas(64) std::atomic<Node*> returned_{nullptr};
  // About how many wait there (exact but for gives racing a collect): beyond max_spare a block
  // goes back to the heap at once, so a strand that takes nothing for a while (an idle
  // connection whose handlers let a burst of chunks go) does not hold them all.
  std::atomic<std::size_t> returned_count_{0};
};

// An allocator for std::allocate_shared that takes its block (the object and its control block
// together) from a BlockPool. `pool` may point into its owner (an aliasing shared_ptr), and is
// read only while allocating: it must outlive the allocate_shared call. Each block taken holds a
// reference of its own to the owner, at its end, given up only after the block went back: the
// pool outlives every block it handed out. The allocator's copies (libstdc++ makes and destroys
// several per shared object) hold none, so a shared object costs one increment and one decrement
// of the owner's count, a count the client's other threads touch too, however often the
// allocator is copied.
template <typename T>
class PooledAllocator {
 public:
  using value_type = T;

  explicit PooledAllocator(const std::shared_ptr<BlockPool>& pool)
      : pool_(&pool), block_size_(pool->block_size()) {}
  template <typename U>
  PooledAllocator(const PooledAllocator<U>& other)
      : pool_(other.pool_), block_size_(other.block_size_) {}

  T* allocate(std::size_t n) {
    if (!fits(n)) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* block = (*pool_)->take();
    ::new (keeper_of(block)) Keeper(*pool_);
    return static_cast<T*>(block);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (!fits(n)) return ::operator delete(p);
    Keeper* slot = keeper_of(p);
    const Keeper keeper = std::move(*slot);
    slot->~Keeper();
    keeper->give(p);
  }  // the keeper goes last: the pool took the block back before its owner may go

  template <typename U>
  bool operator==(const PooledAllocator<U>& other) const {
    return pool_ == other.pool_;
  }
  template <typename U>
  bool operator!=(const PooledAllocator<U>& other) const {
    return pool_ != other.pool_;
  }

 private:
  template <typename U>
  friend class PooledAllocator;
  using Keeper = std::shared_ptr<BlockPool>;
  static constexpr std::size_t keeper_offset() {
    return (sizeof(T) + alignof(Keeper) - 1) / alignof(Keeper) * alignof(Keeper);
  }
  static Keeper* keeper_of(void* block) {
    return std::launder(reinterpret_cast<Keeper*>(static_cast<char*>(block) + keeper_offset()));
  }
  // From the sizes alone: deallocate() must not read the pool through pool_, which may be gone.
  bool fits(std::size_t n) const {
    return n == 1 && keeper_offset() + sizeof(Keeper) <= block_size_ &&
           alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  }

  const std::shared_ptr<BlockPool>* pool_;
  std::size_t block_size_;
};

// A pool inside `owner`, as a PooledAllocator's blocks keep it: through a count of its own (a
// small shared object that holds the owner), not the owner's. The owner's count is touched by
// every thread that posts work for it; a block's birth on the strand and death on a handler
// thread then contend with all of them for one cache line.
template <typename Owner>
std::shared_ptr<BlockPool> anchored_pool(const std::shared_ptr<Owner>& owner, BlockPool& pool) {
  return std::shared_ptr<BlockPool>(std::make_shared<std::shared_ptr<Owner>>(owner), &pool);
}

// The block size for a T made by std::allocate_shared: T, its control block (counts, a vtable
// pointer, the allocator) and the block's reference to the pool's owner, with room to spare.
template <typename T>
constexpr std::size_t shared_block_size() {
  return (sizeof(T) + 64 + 15) / 16 * 16;
}

}  // namespace polybus::detail
