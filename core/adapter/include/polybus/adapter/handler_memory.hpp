// SPDX-License-Identifier: Apache-2.0
// Memory for the one operation an object keeps outstanding of a kind (a socket's read, its
// write, a post to the strand), so that the operations asio makes for each call come from here,
// not from the heap. asio's own per-thread cache holds two blocks and throws one away whenever a
// larger one is wanted, so a thread that mixes reads, writes, strand hand-offs and posts
// allocated for most of them; a thread that is not asio's (a publisher's) has no cache at all
// (docs/performance.md, "Allocations per message"). An operation that finds both blocks taken, or
// that is larger, gets the heap as before.
//
// Two blocks: a post to an idle strand makes the strand's queued operation and, with the same
// allocator, the strand's invoker. The invoker holds nothing of the owner, and destroying the
// io_context destroys the strand's queue (the handler, maybe the owner with it) before the
// invoker. So the blocks are not inside the owner: they are one heap allocation made with the
// owner, which the owner gives up when it dies and the last block to come back frees.
#pragma once

#include "polybus/export.hpp"

#include <asio/bind_allocator.hpp>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace polybus {

class POLYBUS_API HandlerMemory {
 public:
  // Room for a socket operation with its handler and executor: asio 1.22's plain write takes
  // 576 bytes, and no TLS operation of the transport's tests found 1024 too small.
  static constexpr std::size_t kSize = 1024;
  static constexpr unsigned kBlocks = 2;

  HandlerMemory() : blocks_(new Blocks) {}
  HandlerMemory(const HandlerMemory&) = delete;
  HandlerMemory& operator=(const HandlerMemory&) = delete;
  ~HandlerMemory() { blocks_->orphan(); }

  void* allocate(std::size_t size) { return blocks_->allocate(size); }
  void deallocate(void* pointer) noexcept { Blocks::deallocate(blocks_, pointer); }
  // How many blocks are handed out now (for tests).
  unsigned in_use() const { return blocks_->in_use(); }
  // pointer is one of the blocks (for tests).
  bool holds(const void* pointer) const { return blocks_->index_of(pointer) < kBlocks; }

 private:
  template <typename T>
  friend class HandlerAllocator;

  // Atomic throughout: an aborted operation of an ended connection may give its block back on
  // another io thread while the next connection's operation asks for one, and the owner may die
  // on any thread.
  struct Blocks {
    static constexpr unsigned kOrphaned = 1u << kBlocks;
    static constexpr unsigned kTaken = kOrphaned - 1;

    alignas(std::max_align_t) unsigned char bytes[kBlocks][kSize];
    std::atomic<unsigned> state{0};  // a bit per block handed out, and kOrphaned

    void* allocate(std::size_t size) {
      if (size <= kSize)
        for (unsigned i = 0; i < kBlocks; ++i)
          if (!(state.fetch_or(1u << i, std::memory_order_acquire) & (1u << i))) return bytes[i];
      return ::operator new(size);
    }
    static void deallocate(Blocks* blocks, void* pointer) noexcept {
      // By address only: for a heap pointer, blocks may be gone already (the owner died and its
      // blocks came back); a block of its own means they are still here.
      const auto at = reinterpret_cast<std::uintptr_t>(pointer);
      const auto begin = reinterpret_cast<std::uintptr_t>(blocks) + offsetof(Blocks, bytes);
      if (at < begin || at >= begin + sizeof(bytes)) return ::operator delete(pointer);
      const auto i = static_cast<unsigned>((at - begin) / kSize);
      const unsigned before = blocks->state.fetch_and(~(1u << i), std::memory_order_acq_rel);
      if (before == (kOrphaned | (1u << i))) delete blocks;  // the owner is gone: the last out
    }
    void orphan() noexcept {
      if (!(state.fetch_or(kOrphaned, std::memory_order_acq_rel) & kTaken)) delete this;
    }
    unsigned index_of(const void* pointer) const {
      for (unsigned i = 0; i < kBlocks; ++i)
        if (pointer == bytes[i]) return i;
      return kBlocks;
    }
    unsigned in_use() const {
      const unsigned taken = state.load(std::memory_order_relaxed) & kTaken;
      unsigned n = 0;
      for (unsigned i = 0; i < kBlocks; ++i) n += (taken >> i) & 1u;
      return n;
    }
  };

  Blocks* blocks_;
};

// The allocator asio finds on a handler (asio::bind_allocator) to place its operations in a
// HandlerMemory's blocks. It points at the blocks, not at the owner, so an operation may give its
// block back after the owner is gone.
template <typename T>
class HandlerAllocator {
 public:
  using value_type = T;

  explicit HandlerAllocator(HandlerMemory& memory) : blocks_(memory.blocks_) {}
  template <typename U>
  HandlerAllocator(const HandlerAllocator<U>& other) noexcept : blocks_(other.blocks_) {}

  T* allocate(std::size_t n) { return static_cast<T*>(blocks_->allocate(sizeof(T) * n)); }
  void deallocate(T* pointer, std::size_t) noexcept {
    HandlerMemory::Blocks::deallocate(blocks_, pointer);
  }

  template <typename U>
  bool operator==(const HandlerAllocator<U>& other) const noexcept {
    return blocks_ == other.blocks_;
  }
  template <typename U>
  bool operator!=(const HandlerAllocator<U>& other) const noexcept {
    return blocks_ != other.blocks_;
  }

 private:
  template <typename U>
  friend class HandlerAllocator;
  HandlerMemory::Blocks* blocks_;
};

// handler, its operations placed in memory.
template <typename Handler>
auto in_memory(HandlerMemory& memory, Handler&& handler) {
  return asio::bind_allocator(HandlerAllocator<void>(memory), std::forward<Handler>(handler));
}

}  // namespace polybus
