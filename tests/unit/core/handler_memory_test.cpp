// SPDX-License-Identifier: Apache-2.0
// HandlerMemory: asio places the operations of a handler bound with in_memory() in its blocks
// (a strand post and the idle strand's invoker) and gives them back; what does not fit, or comes
// while both blocks are taken, goes to the heap. The blocks outlive an owner that dies with one
// still out.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <cstdint>
#include <memory>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/handler_memory.hpp"

using polybus::HandlerMemory;
using polybus::in_memory;

TEST_CASE("handler memory: its blocks first, then the heap, the blocks come back",
          "[handler_memory]") {
  HandlerMemory memory;
  void* first = memory.allocate(HandlerMemory::kSize);
  void* second = memory.allocate(8);
  void* third = memory.allocate(8);  // both blocks are taken
  CHECK(memory.holds(first));
  CHECK(memory.holds(second));
  CHECK(first != second);
  CHECK_FALSE(memory.holds(third));
  CHECK(reinterpret_cast<std::uintptr_t>(first) % alignof(std::max_align_t) == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(second) % alignof(std::max_align_t) == 0);
  CHECK(memory.in_use() == 2);
  memory.deallocate(third);
  CHECK(memory.in_use() == 2);
  memory.deallocate(first);
  CHECK(memory.in_use() == 1);
  CHECK(memory.allocate(16) == first);  // the free one, whichever it is
  memory.deallocate(second);
  memory.deallocate(first);
  CHECK(memory.in_use() == 0);
  void* large = memory.allocate(HandlerMemory::kSize + 1);  // free, but too small for it
  CHECK_FALSE(memory.holds(large));
  CHECK(memory.in_use() == 0);
  memory.deallocate(large);
}

TEST_CASE("handler memory: an owner may die with its blocks out, the last one back frees them",
          "[handler_memory]") {
  void* block = nullptr;
  {
    auto memory = std::make_unique<HandlerMemory>();
    polybus::HandlerAllocator<char> allocator(*memory);
    block = allocator.allocate(100);
    CHECK(memory->holds(block));
    memory.reset();
    // The allocator (an operation's copy) gives the block back after its owner is gone. Under
    // ASan this use would be reported if the blocks had gone with the owner, and a leak if the
    // last block back did not free them.
    allocator.deallocate(static_cast<char*>(block), 100);
  }
  {
    auto memory = std::make_unique<HandlerMemory>();
    polybus::HandlerAllocator<char> allocator(*memory);
    char* a = allocator.allocate(10);
    char* b = allocator.allocate(10);
    memory.reset();
    allocator.deallocate(a, 10);
    allocator.deallocate(b, 10);  // the last one out
  }
}

TEST_CASE("handler memory: asio places a post and a strand post there, and gives them back",
          "[handler_memory]") {
  asio::io_context io;
  polybus::Strand strand(io.get_executor());
  HandlerMemory memory;
  int ran = 0;
  asio::post(io, in_memory(memory, [&] {
               // The operation's block is given back before the handler runs.
               CHECK(memory.in_use() == 0);
               ++ran;
             }));
  CHECK(memory.in_use() == 1);
  io.run();
  CHECK(ran == 1);
  CHECK(memory.in_use() == 0);

  io.restart();
  asio::post(strand, in_memory(memory, [&] {
               // Both given back: asio frees an operation before it calls the function in it.
               CHECK(memory.in_use() == 0);
               ++ran;
             }));
  CHECK(memory.in_use() == 2);  // the queued operation and the idle strand's invoker
  io.run();
  CHECK(ran == 2);
  CHECK(memory.in_use() == 0);

  // A chain in which each handler posts the next: the one block serves them all in turn.
  io.restart();
  struct Chain {
    polybus::Strand& strand;
    HandlerMemory& memory;
    int& ran;
    int left;
    void operator()() {
      ++ran;
      if (--left > 0) asio::post(strand, in_memory(memory, Chain{strand, memory, ran, left}));
    }
  };
  asio::post(strand, in_memory(memory, Chain{strand, memory, ran, 1000}));
  io.run();
  CHECK(ran == 1002);
  CHECK(memory.in_use() == 0);
}

TEST_CASE(
    "handler memory: an owner that only its pending strand post keeps alive may go with "
    "the io_context",
    "[handler_memory]") {
  // The io_context destroys the strand's queue (the handler, and with it the owner and its
  // memory) before the strand's invoker, which is in the owner's second block: the blocks
  // outlive the owner until the invoker gives its block back (ASan reports the use otherwise).
  struct Owner {
    Owner(int& deaths, bool& in_use_at_death) : deaths(deaths), in_use_at_death(in_use_at_death) {}
    ~Owner() {
      ++deaths;
      in_use_at_death = memory.in_use() > 0;
    }
    HandlerMemory memory;
    int& deaths;
    bool& in_use_at_death;
  };
  int deaths = 0;
  bool in_use_at_death = false;
  auto io = std::make_unique<asio::io_context>();
  {
    polybus::Strand strand(io->get_executor());
    auto owner = std::make_shared<Owner>(deaths, in_use_at_death);
    asio::post(strand, in_memory(owner->memory, [owner] { FAIL("never run"); }));
    CHECK(owner->memory.in_use() == 2);
  }
  CHECK(deaths == 0);
  io.reset();  // with the post pending
  CHECK(deaths == 1);
  CHECK(in_use_at_death);
}

TEST_CASE("handler memory: an operation destroyed unrun gives its block back", "[handler_memory]") {
  HandlerMemory memory;
  {
    asio::io_context io;
    asio::post(io, in_memory(memory, [] { FAIL("never run"); }));
    CHECK(memory.in_use() == 1);
  }  // the io_context is destroyed with the operation pending
  CHECK(memory.in_use() == 0);
}
