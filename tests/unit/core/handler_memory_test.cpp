// HandlerMemory: asio places an operation bound with in_memory() in its block and gives it back;
// what does not fit, or comes while the block is taken (an idle strand's invoker), goes to the
// heap.
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

namespace {

bool inside(const HandlerMemory& memory, const void* pointer) {
  const auto* begin = reinterpret_cast<const unsigned char*>(&memory);
  const auto* p = static_cast<const unsigned char*>(pointer);
  return p >= begin && p < begin + sizeof(HandlerMemory);
}

}  // namespace

TEST_CASE("handler memory: its block first, then the heap; the block comes back",
          "[handler_memory]") {
  HandlerMemory memory;
  void* first = memory.allocate(HandlerMemory::kSize);
  void* second = memory.allocate(8);  // the block is taken
  CHECK(inside(memory, first));
  CHECK_FALSE(inside(memory, second));
  CHECK(reinterpret_cast<std::uintptr_t>(first) % alignof(std::max_align_t) == 0);
  CHECK(memory.in_use());
  memory.deallocate(second);
  CHECK(memory.in_use());
  memory.deallocate(first);
  CHECK_FALSE(memory.in_use());
  void* large = memory.allocate(HandlerMemory::kSize + 1);  // free, but too small for it
  CHECK_FALSE(inside(memory, large));
  CHECK_FALSE(memory.in_use());
  memory.deallocate(large);
  CHECK(memory.allocate(16) == first);
  memory.deallocate(first);
  CHECK_FALSE(memory.in_use());
}

TEST_CASE("handler memory: asio places a post and a strand post there, and gives them back",
          "[handler_memory]") {
  asio::io_context io;
  polybus::Strand strand(io.get_executor());
  HandlerMemory memory;
  int ran = 0;
  asio::post(io, in_memory(memory, [&] {
               // The operation's block is given back before the handler runs.
               CHECK_FALSE(memory.in_use());
               ++ran;
             }));
  CHECK(memory.in_use());
  io.run();
  CHECK(ran == 1);
  CHECK_FALSE(memory.in_use());

  io.restart();
  asio::post(strand, in_memory(memory, [&] {
               CHECK_FALSE(memory.in_use());
               ++ran;
             }));
  CHECK(memory.in_use());
  io.run();
  CHECK(ran == 2);
  CHECK_FALSE(memory.in_use());

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
  CHECK_FALSE(memory.in_use());
}

TEST_CASE(
    "handler memory: an owner that only its pending strand post keeps alive may go with "
    "the io_context",
    "[handler_memory]") {
  // The io_context destroys the strand's queue (the handler, and with it the owner and its
  // memory) before the strand's invoker, so the invoker must not be in the owner's memory: the
  // owner finds its block given back when it dies.
  struct Owner {
    Owner(int& deaths, bool& in_use_at_death) : deaths(deaths), in_use_at_death(in_use_at_death) {}
    ~Owner() {
      ++deaths;
      in_use_at_death = memory.in_use();
    }
    HandlerMemory memory;
    int& deaths;
    bool& in_use_at_death;
  };
  int deaths = 0;
  bool in_use_at_death = true;
  auto io = std::make_unique<asio::io_context>();
  {
    polybus::Strand strand(io->get_executor());
    auto owner = std::make_shared<Owner>(deaths, in_use_at_death);
    asio::post(strand, in_memory(owner->memory, [owner] { FAIL("never run"); }));
    CHECK(owner->memory.in_use());
  }
  CHECK(deaths == 0);
  io.reset();  // with the post pending
  CHECK(deaths == 1);
  CHECK_FALSE(in_use_at_death);
}

TEST_CASE("handler memory: an operation destroyed unrun gives its block back", "[handler_memory]") {
  HandlerMemory memory;
  {
    asio::io_context io;
    asio::post(io, in_memory(memory, [] { FAIL("never run"); }));
    CHECK(memory.in_use());
  }  // the io_context is destroyed with the operation pending
  CHECK_FALSE(memory.in_use());
}
