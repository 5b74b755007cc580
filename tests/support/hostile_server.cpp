// SPDX-License-Identifier: Apache-2.0
#include "hostile_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace polybus::test {

namespace {
// Polls in short steps so that a stopping server is noticed promptly.
constexpr int kPollStepMs = 20;
}  // namespace

bool HostileConnection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    if (stopping_.load()) return false;
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, kPollStepMs) <= 0) continue;
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool HostileConnection::read_some(std::chrono::milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (stopping_.load()) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollStepMs) > 0) {
      char buffer[65536];
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<std::size_t>(n));
      return true;
    }
    if (std::chrono::steady_clock::now() >= until) return true;
  }
}

bool HostileConnection::read_until(const std::function<bool(std::string&)>& pred,
                                   std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (!pred(received_)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    if (!read_some()) return false;
  }
  return true;
}

void HostileConnection::hold_open() {
  while (!stopping_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollStepMs) > 0) {
      char buffer[65536];
      if (::recv(fd_, buffer, sizeof buffer, 0) <= 0) return;
    }
  }
}

void HostileConnection::stop_reading() {
  while (!stopping_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(kPollStepMs));
}

HostileServer::HostileServer(Script script) : script_(std::move(script)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error("bind/listen on loopback failed");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

HostileServer::~HostileServer() {
  stopping_.store(true);
  acceptor_.join();
  std::vector<std::thread> scripts;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    scripts.swap(scripts_);
  }
  for (auto& t : scripts) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

void HostileServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollStepMs) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    const std::size_t index = accepted_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex_);
    fds_.push_back(fd);
    scripts_.emplace_back([this, fd, index] {
      HostileConnection connection(fd, stopping_);
      script_(connection, index);
      ::shutdown(fd, SHUT_RDWR);  // the script is done: the client sees the connection end
    });
  }
}

bool HostileServer::wait_connections(std::size_t n, std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (accepted_.load() < n) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollStepMs));  // a bounded poll
  }
  return true;
}

std::string be32(std::uint32_t value) {
  std::string out(4, '\0');
  for (int i = 3; i >= 0; --i, value >>= 8)
    out[static_cast<std::size_t>(i)] = static_cast<char>(value & 0xff);
  return out;
}

std::string be64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, value >>= 8)
    out[static_cast<std::size_t>(i)] = static_cast<char>(value & 0xff);
  return out;
}

}  // namespace polybus::test
