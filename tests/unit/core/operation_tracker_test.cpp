// SPDX-License-Identifier: Apache-2.0
// OperationTracker: every operation completes exactly once, by its maker or at its deadline, in
// the order of the deadlines whether they were added in that order (the queue) or not (the heap);
// completed ones are let go, so what it holds stays bounded by what is live.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/client/src/operations.hpp"
#include "polybus/error.hpp"

using namespace std::chrono_literals;
using polybus::Clock;
using polybus::OpCompletion;
using polybus::detail::OperationTracker;

namespace {

struct Fixture {
  asio::io_context io;
  polybus::Strand strand{asio::make_strand(io)};
  std::shared_ptr<OperationTracker> tracker = std::make_shared<OperationTracker>(strand, nullptr);
  std::vector<std::string> completed;  // "name:ok" or "name:timeout", in completion order

  OpCompletion add(const std::string& name, Clock::time_point deadline) {
    return tracker->add(
        deadline,
        [this, name = name](std::error_code ec, std::string, std::string) {
          completed.push_back(name + (ec == polybus::errc::timeout ? ":timeout" : ":ok"));
        },
        "op ", name, Clock::now());
  }
};

}  // namespace

TEST_CASE("operation tracker: deadlines fire in their order, queued or heaped",
          "[operation_tracker]") {
  Fixture f;
  const auto base = Clock::now() - 1h;  // every deadline already passed: the first look ends them
  std::vector<OpCompletion> held;
  held.push_back(f.add("c", base + 30ms));
  held.push_back(f.add("d", base + 40ms));
  held.push_back(f.add("a", base + 10ms));  // earlier than the newest queued: the heap
  held.push_back(f.add("e", base + 50ms));
  held.push_back(f.add("b", base + 20ms));
  held.push_back(f.add("never", Clock::time_point::max()));
  held[3](std::error_code{}, {}, {});  // e completes first, by its maker
  f.io.run_for(5s);
  CHECK(f.completed ==
        std::vector<std::string>{"e:ok", "a:timeout", "b:timeout", "c:timeout", "d:timeout"});
  CHECK(f.tracker->live() == 1);
  held[5](std::error_code{}, {}, {});
  held[5](std::error_code{}, {}, {});  // a second completion is ignored
  CHECK(f.completed.back() == "never:ok");
  CHECK(f.completed.size() == 6);
  CHECK(f.tracker->live() == 0);
  CHECK(f.tracker->held() == 0);
}

TEST_CASE("operation tracker: one that stays pending does not keep those completed after it",
          "[operation_tracker]") {
  Fixture f;
  const auto deadline = Clock::now() + 1h;
  auto first = f.add("first", deadline);
  for (int i = 0; i < 100000; ++i) {
    auto op = f.add("n" + std::to_string(i), deadline + std::chrono::microseconds(i));
    op(std::error_code{}, {}, {});
    // The first, still pending, holds the queue's front: prune() keeps what is held near live.
    REQUIRE(f.tracker->held() <= std::max<std::size_t>(1025, 4 * f.tracker->live() + 1));
  }
  CHECK(f.tracker->live() == 1);
  first(std::error_code{}, {}, {});
  CHECK(f.tracker->held() == 0);
}

TEST_CASE("operation tracker: completed in order, each is let go before the next is added",
          "[operation_tracker]") {
  Fixture f;
  const auto deadline = Clock::now() + 1h;
  std::vector<OpCompletion> window;
  for (int i = 0; i < 64; ++i) window.push_back(f.add("w" + std::to_string(i), deadline));
  for (int i = 0; i < 10000; ++i) {
    window[static_cast<std::size_t>(i % 64)](std::error_code{}, {}, {});
    window[static_cast<std::size_t>(i % 64)] = f.add("n" + std::to_string(i), deadline);
    REQUIRE(f.tracker->held() <= 65);
  }
  CHECK(f.tracker->live() == 64);
}

TEST_CASE("operation tracker: fail_all ends queued and heaped ones alike, once",
          "[operation_tracker]") {
  Fixture f;
  const auto deadline = Clock::now() + 1h;
  auto a = f.add("a", deadline + 2s);
  auto b = f.add("b", deadline + 1s);  // heaped
  auto c = f.add("c", Clock::time_point::max());
  f.tracker->fail_all(make_error_code(polybus::errc::closed), "closed");
  CHECK(f.completed.size() == 3);
  CHECK(f.tracker->live() == 0);
  b(std::error_code{}, {}, {});
  CHECK(f.completed.size() == 3);
}
