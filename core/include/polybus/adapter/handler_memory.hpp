// Memory for the one operation an object keeps outstanding of a kind (a socket's read, its
// write), so that the operation asio makes for each call comes from here, not from the heap.
// asio's own per-thread cache holds two blocks and throws one away whenever a larger one is
// wanted, so a thread that mixes reads, writes, strand hand-offs and posts allocated for most of
// them (docs/performance.md, session 21). An operation that finds the memory taken, or that is
// larger, gets the heap as before.
//
// The memory must outlive the operation: keep it in the object the operation's handler holds
// alive (asio gives an operation's memory back before it calls the handler, with the handler
// still alive). One block, not more: a post to an idle strand makes the strand's invoker with
// the same allocator while the operation holds the block, and the invoker holds nothing of the
// owner. Destroying the io_context destroys the strand's queue (the handler, maybe the owner
// with it) before the invoker; so the invoker must get the heap.
#pragma once

#include <asio/bind_allocator.hpp>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <new>
#include <utility>

namespace polybus {

class HandlerMemory {
 public:
  // Room for a socket operation with its handler and executor: asio 1.22's plain write takes
  // 576 bytes, and no TLS operation of the transport's tests found 1024 too small.
  static constexpr std::size_t kSize = 1024;

  HandlerMemory() = default;
  HandlerMemory(const HandlerMemory&) = delete;
  HandlerMemory& operator=(const HandlerMemory&) = delete;

  void* allocate(std::size_t size) {
    // Atomic: an aborted operation of an ended connection may give the block back on another
    // io thread while the next connection's operation asks for it.
    if (size <= kSize && !in_use_.exchange(true, std::memory_order_acquire)) return bytes_;
    return ::operator new(size);
  }
  void deallocate(void* pointer) noexcept {
    if (pointer == bytes_) return in_use_.store(false, std::memory_order_release);
    ::operator delete(pointer);
  }
  // An owner never dies with its block out: whatever holds the block holds the owner.
  ~HandlerMemory() { assert(!in_use()); }
  // The block is handed out now (for tests).
  bool in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  template <typename T>
  friend class HandlerAllocator;
  alignas(std::max_align_t) unsigned char bytes_[kSize];
  std::atomic<bool> in_use_{false};
};

// The allocator asio finds on a handler (asio::bind_allocator) to place its operation in a
// HandlerMemory.
template <typename T>
class HandlerAllocator {
 public:
  using value_type = T;

  explicit HandlerAllocator(HandlerMemory& memory)
      : memory_(&memory), block_(memory.bytes_), in_use_(&memory.in_use_) {}
  template <typename U>
  HandlerAllocator(const HandlerAllocator<U>& other) noexcept
      : memory_(other.memory_), block_(other.block_), in_use_(other.in_use_) {}

  T* allocate(std::size_t n) { return static_cast<T*>(memory_->allocate(sizeof(T) * n)); }
  // Touches the memory only for its own block: a heap allocation (an idle strand's invoker,
  // say) may be given back after the owner of the memory is gone.
  void deallocate(T* pointer, std::size_t) noexcept {
    if (static_cast<void*>(pointer) == block_)
      return in_use_->store(false, std::memory_order_release);
    ::operator delete(pointer);
  }

  template <typename U>
  bool operator==(const HandlerAllocator<U>& other) const noexcept {
    return memory_ == other.memory_;
  }
  template <typename U>
  bool operator!=(const HandlerAllocator<U>& other) const noexcept {
    return memory_ != other.memory_;
  }

 private:
  template <typename U>
  friend class HandlerAllocator;
  HandlerMemory* memory_;
  void* block_;
  std::atomic<bool>* in_use_;
};

// handler, its operation placed in memory.
template <typename Handler>
auto in_memory(HandlerMemory& memory, Handler&& handler) {
  return asio::bind_allocator(HandlerAllocator<void>(memory), std::forward<Handler>(handler));
}

}  // namespace polybus
