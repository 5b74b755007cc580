// SPDX-License-Identifier: Apache-2.0
// ReadTurn: work deferred on a strand's open turn runs as the turn finishes, in order, with what
// that work defers; another strand, another thread or no turn at all is told to post instead.
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <thread>

#include "polybus/adapter/read_turn.hpp"

using polybus::ReadTurn;
using polybus::Strand;

TEST_CASE("ReadTurn runs deferred work in order as it finishes, and what that work defers",
          "[unit][core]") {
  asio::io_context io;
  const Strand strand = asio::make_strand(io);
  const Strand other = asio::make_strand(io);
  std::string ran;
  CHECK_FALSE(ReadTurn::open_on(strand));  // no turn: the caller posts
  {
    ReadTurn turn(strand);
    CHECK(ReadTurn::open_on(strand));
    CHECK_FALSE(ReadTurn::open_on(other));  // another strand's work is not this turn's
    bool elsewhere = true;
    std::thread([&] { elsewhere = ReadTurn::open_on(strand); }).join();
    CHECK_FALSE(elsewhere);  // nor another thread's
    ReadTurn::defer([&] {
      ran += "a";
      REQUIRE(ReadTurn::open_on(strand));  // still open while its work runs
      ReadTurn::defer([&] { ran += "c"; });
    });
    ReadTurn::defer([&] { ran += "b"; });
    CHECK(ran.empty());  // nothing before the turn finishes
    turn.finish();
    CHECK(ran == "abc");
  }
  CHECK_FALSE(ReadTurn::open_on(strand));
  {
    ReadTurn turn(strand);
    turn.finish();  // a turn that deferred nothing
  }
  CHECK(ran == "abc");  // each task ran once
}

TEST_CASE("ReadTurn: an exception leaves finish() as a posted handler's would, the rest still run",
          "[unit][core]") {
  asio::io_context io;
  const Strand strand = asio::make_strand(io);
  std::string ran;
  try {
    ReadTurn turn(strand);
    ReadTurn::defer([&] { ran += "a"; });
    ReadTurn::defer([&] {
      ran += "b";
      throw std::runtime_error("from deferred work");
    });
    ReadTurn::defer([&] { ran += "c"; });
    ReadTurn::defer([&] { throw std::runtime_error("a second one"); });
    ReadTurn::defer([&] { ran += "d"; });
    turn.finish();
    FAIL("finish() returned");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "from deferred work");
  }
  // A flush or a subscription's turn deferred after the exception is not lost.
  CHECK(ran == "abcd");
  CHECK_FALSE(ReadTurn::open_on(strand));
}

TEST_CASE("ReadTurn: a turn within a turn has its own work, on its own strand", "[unit][core]") {
  asio::io_context io;
  const Strand outer_strand = asio::make_strand(io);
  const Strand inner_strand = asio::make_strand(io);
  std::string ran;
  ReadTurn outer(outer_strand);
  ReadTurn::defer([&] { ran += "outer;"; });
  {
    ReadTurn inner(inner_strand);
    CHECK(ReadTurn::open_on(inner_strand));
    CHECK_FALSE(ReadTurn::open_on(outer_strand));  // only the innermost takes work
    ReadTurn::defer([&] { ran += "inner;"; });
    inner.finish();
    CHECK(ran == "inner;");
  }
  CHECK(ReadTurn::open_on(outer_strand));
  outer.finish();
  CHECK(ran == "inner;outer;");
}
