// Hostile servers on loopback, one class of misbehaviour per case: each asserts the named error,
// a bound on what the client queued or attempted, and, where a good peer follows, recovery.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>

#include "hostile_server.hpp"
#include "polybus/polybus.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::test;

namespace {

// What a client reported: log lines and state reasons, searchable.
class Reports {
 public:
  ConnectOptions options(Options opts = {}) {
    ConnectOptions o;
    o.options = std::move(opts);
    o.log_level = LogLevel::debug;
    o.log = [this](LogLevel, std::string_view text) { add(std::string(text)); };
    o.on_error = [this](std::error_code ec, const std::string& text) {
      add(ec.message() + ": " + text);
    };
    o.on_state = [this](const StateEvent& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (e.reason) reasons_.insert(e.reason);
      if (e.state == ConnectionState::connecting || e.state == ConnectionState::reconnecting)
        ++attempts_;
      cv_.notify_all();
    };
    return o;
  }
  bool wait_text(const std::string& needle, std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] {
      for (const auto& line : lines_)
        if (line.find(needle) != std::string::npos) return true;
      return false;
    });
  }
  bool saw_reason(std::error_code ec) {
    std::lock_guard<std::mutex> lock(mutex_);
    return reasons_.count(ec) > 0;
  }
  std::size_t attempts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return attempts_;
  }
  std::string dump() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const auto& line : lines_) out += line + "\n";
    return out;
  }

 private:
  void add(std::string line) {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.push_back(std::move(line));
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::set<std::error_code> reasons_;
  std::size_t attempts_ = 0;
};

// ---- NSQ: frames are [size][type][data]; the client's commands are lines ----
std::string nsq_frame(std::uint32_t type, std::string_view data) {
  return be32(static_cast<std::uint32_t>(4 + data.size())) + be32(type) + std::string(data);
}
std::string nsq_response(std::string_view body) { return nsq_frame(0, body); }
std::string nsq_message(std::uint64_t n, std::string_view body) {
  std::string id = std::to_string(n);
  id.resize(16, '0');
  return nsq_frame(2, be64(1) + std::string("\x00\x01", 2) + id + std::string(body));
}
// Magic, IDENTIFY (answered OK) and, for a consumer, SUB (answered OK).
bool nsq_handshake(HostileConnection& c, bool subscribe) {
  if (!c.read_until([](const std::string& r) {
        auto at = r.find("IDENTIFY\n");
        if (at == std::string::npos || r.size() < at + 13) return false;
        auto size = (std::uint32_t(std::uint8_t(r[at + 9])) << 24) |
                    (std::uint32_t(std::uint8_t(r[at + 10])) << 16) |
                    (std::uint32_t(std::uint8_t(r[at + 11])) << 8) | std::uint8_t(r[at + 12]);
        return r.size() >= at + 13 + size;
      }))
    return false;
  if (!c.send(nsq_response("OK"))) return false;
  if (!subscribe) return true;
  if (!c.read_until([](const std::string& r) {
        auto at = r.find("SUB ");
        return at != std::string::npos && r.find('\n', at) != std::string::npos;
      }))
    return false;
  return c.send(nsq_response("OK"));
}

SubscribeOptions group(std::string name) {
  SubscribeOptions o;
  o.group = std::move(name);
  return o;
}

PublishOptions within(std::chrono::milliseconds timeout) {
  PublishOptions o;
  o.timeout = timeout;
  return o;
}

std::size_t count_of(const std::string& haystack, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("nsq: a server that ignores RDY is a protocol error, and the client reconnects",
          "[hostile][nsq]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!nsq_handshake(c, true)) return;
    if (index == 0) {
      // No RDY was sent yet: every message is over the RDY count.
      std::string flood;
      for (int i = 0; i < 2000; ++i) flood += nsq_message(static_cast<std::uint64_t>(i), "x");
      c.send(flood);
    }
    c.hold_open();
  });
  Reports reports;
  Collector got;
  auto client = connect("nsq://" + server.address() + "?reconnect_initial=10ms&max_in_flight=1",
                        reports.options());
  auto sub = client.subscribe("t", group("c"), [&](Message& m) { got.add(std::string(m.payload())); });
  CHECK(reports.wait_text("ignored RDY"));
  CHECK(reports.saw_reason(make_error_code(errc::protocol_error)));
  CHECK(server.wait_connections(2));
  // The bound held: at most the RDY count (1) reached handlers from the lying connection.
  CHECK(got.total() <= 1);
  client.close_sync(5s);
}

TEST_CASE("nsq: a heartbeat flood is answered with one NOP per read, not one per heartbeat",
          "[hostile][nsq]") {
  std::atomic<std::size_t> nops{0};
  constexpr int kHeartbeats = 50000;
  HostileServer server([&](HostileConnection& c, std::size_t index) {
    if (index > 0 || !nsq_handshake(c, true)) return c.hold_open();
    std::string flood;
    for (int i = 0; i < kHeartbeats; ++i) flood += nsq_response("_heartbeat_");
    c.received().clear();
    c.send(flood);
    c.send(nsq_message(1, "after"));  // once the client saw this, it answered what it will
    c.read_until([](const std::string& r) { return r.find("FIN ") != std::string::npos; });
    nops.store(count_of(c.received(), "NOP\n"));
    c.hold_open();
  });
  Collector got;
  auto client = connect("nsq://" + server.address(), {});
  auto sub = client.subscribe("t", group("c"), [&](Message& m) { got.add(std::string(m.payload())); });
  REQUIRE(got.wait_for_count(1));
  REQUIRE(server.wait_connections(1));
  client.close_sync(5s);
  // 50,000 heartbeats (750 KB) arrive in reads of up to 64 KiB: a dozen or so answers.
  INFO("NOPs: " << nops.load());
  CHECK(nops.load() >= 1);
  CHECK(nops.load() <= 200);
}

TEST_CASE("nsq: a frame that drips in is cut off by frame_timeout with a named error",
          "[hostile][nsq]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!nsq_handshake(c, true)) return;
    if (index == 0) {
      // A header announcing 1000 bytes, then a byte every 50 ms: bytes keep coming (so the idle
      // clock never fires), the frame never completes.
      c.send(be32(1000) + be32(2));
      while (!c.stopping() && c.send("x"))
        if (!c.read_some(std::chrono::milliseconds(50))) break;
      return;
    }
    c.hold_open();
  });
  Reports reports;
  auto client = connect("nsq://" + server.address() + "?frame_timeout=300ms&reconnect_initial=10ms",
                        reports.options());
  auto sub = client.subscribe("t", group("c"), [](Message&) {});
  CHECK(reports.wait_text("frame_timeout=300ms"));
  CHECK(reports.saw_reason(make_error_code(errc::limit_exceeded)));
  CHECK(server.wait_connections(2));  // recovery: a fresh connection
  client.close_sync(5s);
}

TEST_CASE("figg: an ACK for a sequence number never sent is a protocol error, not a confirmation",
          "[hostile][figg]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    // Frames are [type:2][version:2][size:4][payload]; a PUBLISH payload is
    // [topic_len:4][topic][seq:8][data_len:4][data]. Skip anything else (PING) until the PUBLISH.
    std::string seq;
    while (seq.empty()) {
      if (!c.read_until([](const std::string& r) {
            if (r.size() < 8) return false;
            auto size = (std::uint32_t(std::uint8_t(r[4])) << 24) | (std::uint32_t(std::uint8_t(r[5])) << 16) |
                        (std::uint32_t(std::uint8_t(r[6])) << 8) | std::uint8_t(r[7]);
            return r.size() >= 8 + size;
          }))
        return;
      std::string& r = c.received();
      auto size = (std::uint32_t(std::uint8_t(r[4])) << 24) | (std::uint32_t(std::uint8_t(r[5])) << 16) |
                  (std::uint32_t(std::uint8_t(r[6])) << 8) | std::uint8_t(r[7]);
      if (r[0] == 0 && r[1] == 5) {
        auto topic_len = (std::size_t(std::uint8_t(r[8])) << 24) | (std::size_t(std::uint8_t(r[9])) << 16) |
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
  auto client = connect("figg://" + server.address() + "?reconnect_initial=10ms", reports.options());
  auto ec = client.publish_sync("t", "payload", within(10s));
  CHECK(reports.wait_text("acknowledged sequence number 18446744073709551615"));
  CHECK(reports.saw_reason(make_error_code(errc::protocol_error)));
  // The publish was confirmed only by the honest second connection, after the resend.
  CHECK(server.connections() >= 2);
  CHECK_FALSE(ec);
  client.close_sync(5s);
}

namespace {
// QuickIO raw: "/qio/ohai" both ways, then [length:8][event text] frames.
std::string qio_frame(std::string_view event) { return be64(event.size()) + std::string(event); }
bool qio_handshake(HostileConnection& c) {
  if (!c.read_until([](const std::string& r) { return r.size() >= 9; })) return false;
  c.received().erase(0, 9);
  return c.send("/qio/ohai");
}
}  // namespace

TEST_CASE("quickio: a callback reply nested 100,000 deep is refused without a crash",
          "[hostile][quickio]") {
  HostileServer server([](HostileConnection& c, std::size_t index) {
    if (!qio_handshake(c)) return;
    if (index == 0) {
      // Wait for the request event "<path>:<id>=<json>" and answer its callback id.
      if (!c.read_until([](const std::string& r) { return r.find("room:") != std::string::npos &&
                                                          r.find('=', r.find("room:")) != std::string::npos; }))
        return;
      const std::string& r = c.received();
      auto colon = r.find("room:") + 5;
      std::string id = r.substr(colon, r.find('=', colon) - colon);
      std::string deep(100000, '[');
      deep += std::string(100000, ']');
      c.send(qio_frame("/qio/callback/" + id + ":0={\"code\":200,\"data\":" + deep + "}"));
    }
    c.hold_open();
  });
  Reports reports;
  auto client = connect("quickio://" + server.address() + "?reconnect_initial=10ms", reports.options());
  auto reply = client.request_sync("room", "hi", 10s);
  CHECK(reply.ec);
  INFO(reports.dump().substr(0, 3000));
  CHECK(reports.wait_text("nested at most 64 deep"));
  CHECK(server.wait_connections(2));  // and it came back
  client.close_sync(5s);
}

TEST_CASE("quickio: moves in a loop back off and stop at max_redirects", "[hostile][quickio]") {
  std::atomic<std::uint16_t> other_port{0};
  auto mover = [&](std::uint16_t* to) {
    return [to](HostileConnection& c, std::size_t) {
      if (!qio_handshake(c)) return;
      c.send(qio_frame("/qio/move:0=\"127.0.0.1:" + std::to_string(*to) + "\""));
      c.hold_open();
    };
  };
  std::uint16_t port_a = 0, port_b = 0;
  HostileServer a(mover(&port_b));
  HostileServer b(mover(&port_a));
  port_a = a.port();
  port_b = b.port();
  Reports reports;
  auto client = connect("quickio://" + a.address() + "?max_redirects=4&reconnect_initial=20ms",
                        reports.options());
  CHECK(reports.wait_text("max_redirects=4"));
  INFO(reports.dump().substr(0, 3000));
  // Each move after the first waited for the backoff; past four, moves are refused and the
  // client stays on its backoff against the last server instead of bouncing.
  const std::size_t at_limit = a.connections() + b.connections();
  CHECK(at_limit <= 6);
  client.close_sync(5s);
  (void)other_port;
}
