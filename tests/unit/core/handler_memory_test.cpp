// HandlerMemory: asio places an operation bound with in_memory() in its blocks, a strand post's
// invoker included, and gives them back; what does not fit goes to the heap.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <cstdint>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/handler_memory.hpp"

using polybus::HandlerMemory;
using polybus::in_memory;

namespace {

bool inside(const HandlerMemory& memory, const void* pointer) {
  const auto* begin = reinterpret_cast<const unsigned char*>(&memory);
  const auto* p = static_cast<const unsigned char*>(pointer);
  return p >= begin && p < begin + sizeof(HandlerMemory);
}

}  // namespace

TEST_CASE("handler memory: its blocks first, then the heap; a block comes back",
          "[handler_memory]") {
  HandlerMemory memory;
  void* first = memory.allocate(100);
  void* second = memory.allocate(HandlerMemory::kSize);
  void* third = memory.allocate(8);  // both blocks taken
  void* large = [&] {
    memory.deallocate(memory.allocate(1));  // a block is free again, but too small for:
    return memory.allocate(HandlerMemory::kSize + 1);
  }();
  CHECK(inside(memory, first));
  CHECK(inside(memory, second));
  CHECK(first != second);
  CHECK_FALSE(inside(memory, third));
  CHECK_FALSE(inside(memory, large));
  CHECK(reinterpret_cast<std::uintptr_t>(first) % alignof(std::max_align_t) == 0);
  CHECK(memory.in_use() == 2);
  memory.deallocate(third);
  memory.deallocate(large);
  CHECK(memory.in_use() == 2);
  memory.deallocate(first);
  CHECK(memory.in_use() == 1);
  CHECK(memory.allocate(16) == first);
  memory.deallocate(first);
  memory.deallocate(second);
  CHECK(memory.in_use() == 0);
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

  // An idle strand: the operation and the strand's invoker, each in a block of its own.
  io.restart();
  asio::post(strand, in_memory(memory, [&] { ++ran; }));
  CHECK(memory.in_use() == 2);
  io.run();
  CHECK(ran == 2);
  CHECK(memory.in_use() == 0);

  // A chain in which each handler posts the next: one pair of blocks serves them all.
  io.restart();
  struct Chain {
    polybus::Strand& strand;
    HandlerMemory& memory;
    int left;
    void operator()() {
      if (--left > 0) asio::post(strand, in_memory(memory, Chain{strand, memory, left}));
    }
  };
  asio::post(strand, in_memory(memory, Chain{strand, memory, 1000}));
  io.run();
  CHECK(memory.in_use() == 0);
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
