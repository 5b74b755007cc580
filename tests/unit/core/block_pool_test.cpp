// SPDX-License-Identifier: Apache-2.0
// detail::BlockPool: blocks come back to the strand that takes them, from any thread, and the
// spare ones stay within their bound.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/adapter/src/block_pool.hpp"
#include "polybus/tools/allocation_counter.hpp"

using polybus::Strand;
using polybus::detail::BlockPool;
using polybus::detail::PooledAllocator;

namespace {

// An io_context and a strand of it; run() runs fn on the strand and waits for it.
struct StrandRunner {
  asio::io_context io;
  Strand strand{io.get_executor()};
  template <typename Fn>
  auto run(Fn fn) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto result = task.get_future();
    asio::post(strand, [&task] { task(); });
    io.restart();
    io.run();
    return result.get();
  }
};

// n blocks taken, then given back: the pool must hand out distinct blocks.
std::set<void*> take_and_give_back(BlockPool& pool, int n) {
  std::set<void*> blocks;
  for (int i = 0; i < n; ++i) blocks.insert(pool.take());
  for (void* block : blocks) pool.give(block);
  return blocks;
}

// n blocks taken on the strand.
std::vector<void*> take_on_strand(StrandRunner& runner, BlockPool& pool, int n) {
  return runner.run([&] {
    std::vector<void*> taken;
    for (int i = 0; i < n; ++i) taken.push_back(pool.take());
    return taken;
  });
}

}  // namespace

TEST_CASE("block pool: the strand takes back the blocks it gave, up to its bound", "[block_pool]") {
  StrandRunner runner;
  BlockPool pool(runner.strand, 64, 2);
  runner.run([&] {
    void* a = pool.take();
    void* b = pool.take();
    void* c = pool.take();
    pool.give(a);
    pool.give(b);
    pool.give(c);  // over the bound: back to the heap
    CHECK(pool.spare() == 2);
    CHECK(take_and_give_back(pool, 2) == std::set<void*>{a, b});
    CHECK(pool.spare() == 2);
  });
}

TEST_CASE("block pool: blocks given back on other threads reach the strand when it runs dry",
          "[block_pool]") {
  StrandRunner runner;
  BlockPool pool(runner.strand, 64, 4096);
  constexpr int kBlocks = 1000;
  auto blocks = take_on_strand(runner, pool, kBlocks);
  // Given back by four threads at once, none of them the strand's.
  std::vector<std::thread> givers;
  for (int t = 0; t < 4; ++t)
    givers.emplace_back([&, t] {
      for (int i = t; i < kBlocks; i += 4) pool.give(blocks[static_cast<std::size_t>(i)]);
    });
  for (auto& giver : givers) giver.join();
  CHECK(pool.spare() == 0);  // not collected yet
  const std::set<void*> given(blocks.begin(), blocks.end());
  runner.run([&] {
    CHECK(take_and_give_back(pool, kBlocks) == given);  // every one reused, no new block
  });
}

TEST_CASE("block pool: what is given back off the strand waits within the bound too",
          "[block_pool]") {
  // A strand that takes nothing for a while (an idle connection whose handlers let a burst of
  // read chunks go) must not hold every block given back meanwhile.
  StrandRunner runner;
  BlockPool pool(runner.strand, 64, 4);
  auto blocks = take_on_strand(runner, pool, 10);
  std::thread giver([&] {
    for (void* block : blocks) pool.give(block);  // 6 of them straight back to the heap
  });
  giver.join();
  const std::set<void*> kept(blocks.begin(), blocks.begin() + 4);
  runner.run([&] {
    std::set<void*> taken;
    for (int i = 0; i < 4; ++i) taken.insert(pool.take());
    CHECK(taken == kept);  // the first four given back, and no more
    CHECK(pool.spare() == 0);
    for (void* block : taken) pool.give(block);
  });
}

TEST_CASE("block pool: blocks taken off the strand are the heap's, and may still come back",
          "[block_pool]") {
  StrandRunner runner;
  BlockPool pool(runner.strand, 64, 8);
  void* outside = pool.take();  // not on the strand: operator new
  pool.give(outside);           // not on the strand either: onto the returned list
  runner.run([&] {
    CHECK(pool.take() == outside);
    pool.give(outside);
    CHECK(pool.spare() == 1);
  });
}

TEST_CASE("block pool: the strand takes while other threads give back, without a race",
          "[block_pool]") {
  // For TSan: the strand takes and hands blocks to a consumer thread that gives them back.
  StrandRunner runner;
  BlockPool pool(runner.strand, 64, 64);
  std::mutex mutex;
  std::condition_variable ready;
  std::vector<void*> handed;
  bool done = false;
  std::thread consumer([&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return done || !handed.empty(); });
      auto batch = std::move(handed);
      handed.clear();
      const bool last = done;
      lock.unlock();
      for (void* block : batch) {
        static_cast<char*>(block)[63] = 1;  // the block is the consumer's while it holds it
        pool.give(block);
      }
      if (last && batch.empty()) return;
    }
  });
  runner.run([&] {
    for (int i = 0; i < 20000; ++i) {
      void* block = pool.take();
      static_cast<char*>(block)[0] = 1;
      std::lock_guard<std::mutex> lock(mutex);
      handed.push_back(block);
      ready.notify_one();
    }
  });
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    ready.notify_one();
  }
  consumer.join();
}

TEST_CASE("block pool: shared objects keep the pool's owner alive and reuse its blocks",
          "[block_pool]") {
  StrandRunner runner;
  struct Owner {
    explicit Owner(const Strand& s)
        : pool(s, polybus::detail::shared_block_size<std::string>(), 8) {}
    BlockPool pool;
  };
  auto owner = std::make_shared<Owner>(runner.strand);
  std::weak_ptr<Owner> watch = owner;
  const void* first = nullptr;
  auto kept = runner.run([&] {
    auto one = std::allocate_shared<std::string>(
        PooledAllocator<std::string>(std::shared_ptr<BlockPool>(owner, &owner->pool)), "one");
    first = one.get();
    one.reset();  // its block is spare now
    auto two = std::allocate_shared<std::string>(
        PooledAllocator<std::string>(std::shared_ptr<BlockPool>(owner, &owner->pool)), "two");
    CHECK(static_cast<const void*>(two.get()) == first);  // the same block again
    return two;
  });
  owner.reset();
  CHECK_FALSE(watch.expired());  // `kept` holds it through its allocator
  CHECK(*kept == "two");
  kept.reset();  // freed off the strand: the pool takes it back, then goes with its owner
  CHECK(watch.expired());
}

TEST_CASE("block pool: one without a strand serves its owner, whoever gives back", "[block_pool]") {
  // A machine's pool: the owner takes, and blocks come back from its thread and others alike.
  BlockPool pool(64, 4);
  void* a = pool.take();
  void* b = pool.take();
  void* c = pool.take();
  pool.give(a);  // on the owner's thread: through the returned list all the same
  std::thread giver([&] {
    pool.give(b);
    pool.give(c);
  });
  giver.join();
  CHECK(pool.spare() == 0);  // not collected until the owner runs dry
  CHECK(take_and_give_back(pool, 3) == std::set<void*>{a, b, c});
  // Within the bound: of five given back, at most four come back to be used again (the fifth
  // goes to the heap), so taking five again makes exactly one new block.
  std::vector<void*> five;
  for (int i = 0; i < 5; ++i) five.push_back(pool.take());
  for (void* block : five) pool.give(block);
  std::vector<void*> again;
  again.reserve(5);
  const auto before = polybus::cli::allocations_on_this_thread();
  for (int i = 0; i < 5; ++i) again.push_back(pool.take());
  CHECK(polybus::cli::allocations_on_this_thread() - before == 1);
  for (void* block : again) pool.give(block);
}

TEST_CASE("block pool: a block smaller than a pointer still holds the spare list's link",
          "[block_pool]") {
  // A spare block is a list node: a pool asked for 1-byte blocks makes them a pointer's size,
  // which ASan would otherwise report as an overflow when the node is written.
  BlockPool pool(1, 4);
  CHECK(pool.block_size() == sizeof(void*));
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.take());
  for (void* block : blocks) pool.give(block);
  CHECK(take_and_give_back(pool, 3) == std::set<void*>(blocks.begin(), blocks.end()));
}
