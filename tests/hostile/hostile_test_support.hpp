// SPDX-License-Identifier: Apache-2.0
// What the hostile-server tests of several protocols share: a client's reports, the NSQ and
// QuickIO framing their peers speak, drips, bounds and CPU and memory readings.
#pragma once

#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hostile_server.hpp"

#include "polybus/polybus.hpp"
#include "test_support.hpp"

namespace polybus::test {

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
  bool wait_count(const std::string& needle, std::size_t count,
                  std::chrono::milliseconds bound = kWaitBound) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, bound, [&] {
      std::size_t seen = 0;
      for (const auto& line : lines_) seen += line.find(needle) != std::string::npos ? 1 : 0;
      return seen >= count;
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
inline std::string nsq_frame(std::uint32_t type, std::string_view data) {
  return be32(static_cast<std::uint32_t>(4 + data.size())) + be32(type) + std::string(data);
}
inline std::string nsq_response(std::string_view body) {
  return nsq_frame(0, body);
}
inline std::string nsq_message(std::uint64_t n, std::string_view body) {
  std::string id = std::to_string(n);
  id.resize(16, '0');
  return nsq_frame(2, be64(1) + std::string("\x00\x01", 2) + id + std::string(body));
}

// Where the first whole `line` + 4-byte size + body in r ends (0: none whole yet).
inline std::size_t sized_command_end(const std::string& r, std::string_view line) {
  const auto at = r.find(line);
  if (at == std::string::npos) return 0;
  const auto size_at = r.find('\n', at) + 1;
  if (size_at == 0 || r.size() < size_at + 4) return 0;
  const std::uint32_t size = (std::uint32_t(std::uint8_t(r[size_at])) << 24) |
                             (std::uint32_t(std::uint8_t(r[size_at + 1])) << 16) |
                             (std::uint32_t(std::uint8_t(r[size_at + 2])) << 8) |
                             std::uint8_t(r[size_at + 3]);
  return r.size() >= size_at + 4 + size ? size_at + 4 + size : 0;
}
// Whether r holds the whole of a sized command (its line, a 4-byte size, that many bytes)
// whose line begins with `line` ("IDENTIFY\n", "MPUB t\n").
inline bool holds_sized_command(const std::string& r, std::string_view line) {
  return sized_command_end(r, line) != 0;
}

// Magic, IDENTIFY (answered OK) and, for a consumer, SUB (answered OK).
inline bool nsq_handshake(HostileConnection& c, bool subscribe) {
  if (!c.read_until([](const std::string& r) { return holds_sized_command(r, "IDENTIFY\n"); }))
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

inline SubscribeOptions group(std::string name) {
  SubscribeOptions o;
  o.group = std::move(name);
  return o;
}

inline PublishOptions within(std::chrono::milliseconds timeout) {
  PublishOptions o;
  o.timeout = timeout;
  return o;
}

inline std::size_t count_of(const std::string& haystack, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

// Sends a byte every `period` until the peer goes or the server stops.
inline void drip_every(HostileConnection& c, std::chrono::milliseconds period) {
  while (!c.stopping() && c.send("x"))
    if (!c.read_some(period)) break;
}
inline void drip(HostileConnection& c) {
  drip_every(c, 50ms);
}

// A client of scheme with frame_timeout=300ms against server, whose first connection drips a
// frame: the limit is named, the reason is limit_exceeded, and the client connects again.
inline void expect_cut_off_by_frame_timeout(HostileServer& server, const std::string& scheme) {
  Reports reports;
  auto client =
      connect(scheme + "://" + server.address() + "?frame_timeout=300ms&reconnect_initial=10ms",
              reports.options());
  CHECK(reports.wait_text("frame_timeout=300ms"));
  CHECK(reports.saw_reason(make_error_code(errc::limit_exceeded)));
  CHECK(server.wait_connections(2));
  client.close_sync(5s);
}

// QuickIO raw: "/qio/ohai" both ways, then [length:8][event text] frames.
inline std::string qio_frame(std::string_view event) {
  return be64(event.size()) + std::string(event);
}
inline bool qio_handshake(HostileConnection& c) {
  if (!c.read_until([](const std::string& r) { return r.size() >= 9; })) return false;
  c.received().erase(0, 9);
  return c.send("/qio/ohai");
}

// Whether a sanitizer instruments this build: it runs slower and holds more memory, so bounds
// on time, CPU and memory get room under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// CPU time of this process (client and hostile server threads together: an upper bound on what
// the client spends), in milliseconds.
inline double cpu_ms() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec * 1e3 + usage.ru_utime.tv_usec / 1e3 + usage.ru_stime.tv_sec * 1e3 +
         usage.ru_stime.tv_usec / 1e3;
}

}  // namespace polybus::test
