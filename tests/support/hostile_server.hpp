// SPDX-License-Identifier: Apache-2.0
// A loopback TCP server that misbehaves on purpose: every accepted connection runs a script on a
// thread of its own with a plain blocking socket, so a test states byte by byte what a hostile
// or broken broker sends (floods, drips, lies) and reads what the client answered.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace polybus::test {

class HostileConnection {
 public:
  HostileConnection(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  // False once the peer is gone or the server stops.
  bool send(std::string_view bytes);
  // Reads what is there (waiting up to `wait` for the first byte) onto received(); false when
  // the peer closed or the server stops.
  bool read_some(std::chrono::milliseconds wait = std::chrono::milliseconds(100));
  // Reads until pred(received()) holds; false on close, stop, or after `bound`.
  // pred may consume what it has read (it gets received() itself).
  bool read_until(const std::function<bool(std::string&)>& pred,
                  std::chrono::milliseconds bound = std::chrono::seconds(20));
  std::string& received() { return received_; }
  bool stopping() const { return stopping_.load(); }
  // Waits (reading and discarding nothing) until the peer closes or the server stops.
  void hold_open();
  // Waits until the server stops, reading nothing more, so the peer's writes back up.
  void stop_reading();

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
  std::string received_;
};

class HostileServer {
 public:
  using Script = std::function<void(HostileConnection& connection, std::size_t index)>;
  explicit HostileServer(Script script);
  ~HostileServer();
  HostileServer(const HostileServer&) = delete;
  HostileServer& operator=(const HostileServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::size_t connections() const { return accepted_.load(); }
  // Waits until at least n connections were accepted.
  bool wait_connections(std::size_t n, std::chrono::milliseconds bound = std::chrono::seconds(20));

 private:
  void accept_loop();

  Script script_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> accepted_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<int> fds_;
  std::vector<std::thread> scripts_;
};

// Big-endian integers, as NSQ, Figg and QuickIO raw frames write them.
std::string be32(std::uint32_t value);
std::string be64(std::uint64_t value);

}  // namespace polybus::test
