// SPDX-License-Identifier: Apache-2.0
// Hostile Figg servers: acknowledgements of sequence numbers never sent, frames that drip, and a
// replay that outruns a slow handler.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "hostile_server.hpp"
#include "hostile_test_support.hpp"

#include "polybus/figg_testing.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

TEST_CASE("figg: an ACK for a sequence number never sent is a protocol error, not a confirmation",
          "[hostile][figg]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    // Frames are [type:2][version:2][size:4][payload]; a PUBLISH payload is
    // [topic_len:4][topic][seq:8][data_len:4][data]. Skip anything else (PING) until the PUBLISH.
    std::string seq;
    while (seq.empty()) {
      if (!c.read_until([](const std::string& r) {
            if (r.size() < 8) return false;
            auto size = (std::uint32_t(std::uint8_t(r[4])) << 24) |
                        (std::uint32_t(std::uint8_t(r[5])) << 16) |
                        (std::uint32_t(std::uint8_t(r[6])) << 8) | std::uint8_t(r[7]);
            return r.size() >= 8 + size;
          }))
        return;
      std::string& r = c.received();
      auto size = (std::uint32_t(std::uint8_t(r[4])) << 24) |
                  (std::uint32_t(std::uint8_t(r[5])) << 16) |
                  (std::uint32_t(std::uint8_t(r[6])) << 8) | std::uint8_t(r[7]);
      if (r[0] == 0 && r[1] == 5) {
        auto topic_len = (std::size_t(std::uint8_t(r[8])) << 24) |
                         (std::size_t(std::uint8_t(r[9])) << 16) |
                         (std::size_t(std::uint8_t(r[10])) << 8) | std::uint8_t(r[11]);
        seq = r.substr(12 + topic_len, 8);
      }
      r.erase(0, 8 + size);
    }
    // The first connection lies (2^64-1); the next one acknowledges what it got.
    std::string ack_seq = index == 0 ? be64(~std::uint64_t{0}) : seq;
    c.send(std::string("\x00\x06\x00\x01", 4) + be32(8) + ack_seq);
    c.hold_open();
  });
  Reports reports;
  auto client =
      connect("figg://" + server.address() + "?reconnect_initial=10ms", reports.options());
  auto ec = client.publish_sync("t", "payload", within(10s));
  CHECK(reports.wait_text("acknowledged sequence number 18446744073709551615"));
  CHECK(reports.saw_reason(make_error_code(errc::protocol_error)));
  // The publish was confirmed only by the honest second connection, after the resend.
  CHECK(server.connections() >= 2);
  CHECK_FALSE(ec);
  client.close_sync(5s);
}

TEST_CASE("figg: a replay into a slow handler is held within max_held_messages, nothing lost",
          "[hostile][figg]") {
  auto broker = figg::testing::Broker::launch();
  const std::string url = "figg://" + broker->address();
  constexpr int kCount = 3000;
  {
    auto publisher = connect(url);
    Latch published;
    for (int i = 0; i < kCount; ++i)
      publisher.publish("replay", std::to_string(i), [&](std::error_code ec) {
        CHECK_FALSE(ec);
        published.count_down();
      });
    REQUIRE(published.wait_for(kCount));
    publisher.close_sync(5s);
  }
  Reports reports;
  Collector got;
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool gate_open = false;
  auto subscriber = connect(url + "?max_held_messages=50", reports.options());
  SubscribeOptions from_start;
  from_start.from_offset = 0;
  auto sub = subscriber.subscribe("replay", from_start, [&](Message& m) {
    std::unique_lock<std::mutex> lock(gate_mutex);
    gate_cv.wait(lock, [&] { return gate_open; });  // the first handler waits for the budget
    lock.unlock();
    got.add(std::string(m.payload()));
  });
  // The replay outruns the handler: past 50 held messages the subscription detaches.
  CHECK(reports.wait_text("over max_held_messages=50"));
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    gate_open = true;
  }
  gate_cv.notify_all();
  const bool all = got.wait_for_count(kCount);
  INFO("received " << got.total() << " distinct " << got.distinct() << "\n"
                   << reports.dump().substr(0, 4000));
  REQUIRE(all);
  auto order = got.order();
  for (int i = 0; i < kCount; ++i) REQUIRE(order[static_cast<std::size_t>(i)] == std::to_string(i));
  CHECK(got.distinct() == static_cast<std::size_t>(kCount));
  subscriber.close_sync(5s);
}

TEST_CASE("figg: a frame that drips in is cut off by frame_timeout", "[hostile][figg]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (index == 0) {
      c.send(std::string("\x00\x07\x00\x01", 4) + be32(1000));  // DATA of 1000 bytes...
      drip(c);                                                  // a byte every 50 ms
      return;
    }
    c.hold_open();
  });
  expect_cut_off_by_frame_timeout(server, "figg");
}
