// SPDX-License-Identifier: Apache-2.0
#include "figg_server_broker.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <asio/ip/tcp.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "polybus/testing.hpp"

namespace polybus::test {
namespace {

std::uint16_t free_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

bool accepting(std::uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  std::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  return !ec;
}

class RealFiggBroker : public testing::TestBroker {
 public:
  RealFiggBroker() : port_(free_port()), admin_port_(free_port()) { start(); }
  ~RealFiggBroker() override { stop(); }
  std::string url() const override {
    return "figg://127.0.0.1:" + std::to_string(port_) +
           "?reconnect_initial=10ms&reconnect_max=200ms&ping_interval=200ms";
  }
  bool answers_ping() const override {
    const char* no_ping = std::getenv("POLYBUS_FIGG_SERVER_NO_PING");
    return !(no_ping && std::string(no_ping) == "1");
  }
  void stop() override {
    if (pid_ <= 0) return;
    kill(pid_, SIGINT);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void start() override {
    if (pid_ > 0) return;
    std::vector<std::string> args{
        std::getenv("POLYBUS_FIGG_SERVER"), "--addr=127.0.0.1:" + std::to_string(port_),
        "--admin-addr=127.0.0.1:" + std::to_string(admin_port_), "--commitlog.inmemory"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // posix_spawn, not fork(): a restart launches while the client's threads run, and a fork
    // copies the locks they hold (stderr's, the allocator's), which the child may then wait on
    // for ever before it reaches exec.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t child = -1;
    const int spawned = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0)
      throw std::runtime_error(std::string("cannot start the Figg server: ") +
                               std::strerror(spawned));
    pid_ = child;
    // The server prints nothing machine-readable when ready: poll its port, bounded.
    for (int i = 0; i < 500 && !accepting(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!accepting(port_)) throw std::runtime_error("the Figg server did not start listening");
  }

 private:
  std::uint16_t port_, admin_port_;
  pid_t pid_ = -1;
};

}  // namespace

bool register_real_figg_broker() {
  const char* path = std::getenv("POLYBUS_FIGG_SERVER");
  if (!path || !*path) return false;
  testing::register_test_broker(
      {"figg-real", "figg", [] { return std::make_unique<RealFiggBroker>(); }});
  return true;
}

}  // namespace polybus::test
