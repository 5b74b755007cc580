// SPDX-License-Identifier: Apache-2.0
// Fifo: first in, first out, through its compactions, and it keeps (or gives back) its memory.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "polybus/adapter/fifo.hpp"

using polybus::Fifo;

TEST_CASE("fifo: entries come out in the order they went in, across compactions", "[fifo]") {
  Fifo<std::string> fifo;
  int next_in = 0, next_out = 0;
  // Pushes outpace pops, then pops catch up: the dead prefix is moved down many times.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 7; ++i) fifo.push_back(std::to_string(next_in++));
    for (int i = 0; i < 5; ++i) {
      REQUIRE(fifo.front() == std::to_string(next_out++));
      fifo.pop_front();
    }
    REQUIRE(fifo.size() == static_cast<std::size_t>(next_in - next_out));
  }
  std::string rest, expected;
  for (const auto& entry : fifo) rest += entry + ",";
  for (int i = next_out; i < next_in; ++i) expected += std::to_string(i) + ",";
  CHECK(rest == expected);  // iteration sees the live entries only, oldest first
  while (!fifo.empty()) {
    CHECK(fifo.front() == std::to_string(next_out++));
    fifo.pop_front();
  }
  CHECK(next_out == next_in);
}

TEST_CASE("fifo: a popped entry is released at once, a moved-from fifo is empty", "[fifo]") {
  Fifo<std::shared_ptr<int>> fifo;
  auto held = std::make_shared<int>(1);
  std::weak_ptr<int> watch = held;
  fifo.push_back(std::move(held));
  fifo.push_back(std::make_shared<int>(2));
  fifo.pop_front();
  CHECK(watch.expired());
  Fifo<std::shared_ptr<int>> taken = std::move(fifo);
  CHECK(fifo.empty());  // NOLINT: moved-from is empty, as the class promises
  CHECK(fifo.size() == 0);
  REQUIRE(taken.size() == 1);
  CHECK(*taken.front() == 2);
  fifo.push_back(std::make_shared<int>(3));  // usable again
  CHECK(*fifo.front() == 3);
}

TEST_CASE("fifo: steady traffic reuses its memory, a drained burst gives it back", "[fifo]") {
  Fifo<int> fifo;
  for (int i = 0; i < 100; ++i) fifo.push_back(i);
  const std::size_t kept = fifo.capacity();
  // As many in as out, one at a time, for a long while: never more room than the first 100 took
  // (twice that at most: dead entries are dropped once they are half).
  for (int i = 0; i < 100000; ++i) {
    fifo.push_back(i);
    fifo.pop_front();
    REQUIRE(fifo.capacity() <= 2 * kept);
  }
  CHECK(fifo.size() == 100);
  while (!fifo.empty()) fifo.pop_front();
  CHECK(fifo.capacity() >= kept);  // a modest peak is kept
  for (int i = 0; i < 100000; ++i) fifo.push_back(i);
  while (!fifo.empty()) fifo.pop_front();
  CHECK(fifo.capacity() == 0);  // a peak over kKeptAtMost is given back once drained
}
