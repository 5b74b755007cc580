// SPDX-License-Identifier: Apache-2.0
// The least CPU a MemoDB-shaped exchange can cost on this machine, for comparison with
// `polybus bench memodb+tcp://...`: a requester and a worker (a thread each) talk through a relay
// (a third thread, standing in for the broker) over loopback TCP, 200-byte frames, the relay
// handing the worker one job at a time and holding at most 8 requests, as memo01 does. Nothing
// else: no framing, no event loop beyond one epoll_wait per wake, no allocation. The CPU counted
// is the requester's and the worker's (RUSAGE_THREAD), as the bench counts its requester and
// worker without the broker.
//
//   polybus_loopback_floor [--jobs N] [--mode block|epoll]
//
// block: blocking reads and writes; epoll: non-blocking sockets, and an epoll_wait when a read
// finds nothing, as asio's reads do. Prints one JSON line. Numbers are read by hand, never
// asserted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kFrame = 200;
constexpr int kHeldAtRelay = 8;

[[noreturn]] void fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// A thread's body: an error ends the program with its words (nothing else could join it).
template <typename Fn>
auto or_exit(Fn fn) {
  return [fn]() mutable {
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "polybus_loopback_floor: %s\n", e.what());
      std::_Exit(1);
    }
  };
}

struct Usage {
  double user = 0, system = 0;
  long switches = 0;
};

Usage thread_usage() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_nvcsw};
}

void wait_for(int fd, std::uint32_t events) {
  int ep = epoll_create1(0);
  epoll_event event{};
  event.events = events;
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) != 0) fail("epoll");
  epoll_wait(ep, &event, 1, -1);
  close(ep);
}

// Reads or writes exactly n bytes of a blocking or non-blocking socket.
void transfer(int fd, char* data, std::size_t n, bool write_it) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = write_it ? ::write(fd, data + done, n - done) : ::read(fd, data + done, n - done);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
    } else if (r < 0 && errno == EAGAIN) {
      wait_for(fd, write_it ? EPOLLOUT : EPOLLIN);
    } else {
      fail(write_it ? "write" : "read");
    }
  }
}

// One end's reads: blocking, or an edge-triggered epoll registered once (an event loop's shape).
class Reader {
 public:
  Reader(int fd, bool event_loop) : fd_(fd) {
    if (!event_loop) return;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    epoll_ = epoll_create1(0);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLET;
    if (epoll_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) fail("epoll");
  }
  ~Reader() {
    if (epoll_ >= 0) close(epoll_);
  }
  void read_frame(char* frame) {
    if (epoll_ < 0) return transfer(fd_, frame, kFrame, false);
    std::size_t done = 0;
    while (done < kFrame) {
      ssize_t r = ::read(fd_, frame + done, kFrame - done);
      if (r > 0) {
        done += static_cast<std::size_t>(r);
        continue;
      }
      if (r < 0 && errno != EAGAIN) fail("read");
      epoll_event event{};
      epoll_wait(epoll_, &event, 1, -1);
    }
  }

 private:
  int fd_;
  int epoll_ = -1;
};

int listen_any(std::uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(fd, 4) != 0)
    fail("listen");
  socklen_t size = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  port = ntohs(address.sin_port);
  return fd;
}

void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int connect_to(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    fail("connect");
  no_delay(fd);
  return fd;
}

// The broker's part: requests queue here; the idle worker gets the oldest; its result goes back.
void relay(int requests_listener, int workers_listener, int jobs) {
  int requester = accept(requests_listener, nullptr, nullptr);
  int worker = accept(workers_listener, nullptr, nullptr);
  if (requester < 0 || worker < 0) fail("accept");
  no_delay(requester);
  no_delay(worker);
  int ep = epoll_create1(0);
  for (int fd : {requester, worker}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event);
  }
  std::deque<std::vector<char>> queued;
  std::vector<char> frame(kFrame);
  bool worker_busy = false;
  for (int answered = 0; answered < jobs;) {
    epoll_event events[2];
    int n = epoll_wait(ep, events, 2, -1);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == requester) {
        queued.emplace_back(kFrame);
        transfer(requester, queued.back().data(), kFrame, false);
      } else {
        transfer(worker, frame.data(), kFrame, false);
        transfer(requester, frame.data(), kFrame, true);
        worker_busy = false;
        ++answered;
      }
    }
    if (!worker_busy && !queued.empty()) {
      transfer(worker, queued.front().data(), kFrame, true);
      queued.pop_front();
      worker_busy = true;
    }
  }
  close(ep);
  close(requester);
  close(worker);
}

}  // namespace

int main(int argc, char** argv) try {
  int jobs = 20000;
  bool event_loop = true;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--jobs" && std::atoi(value.c_str()) > 0) {
      jobs = std::atoi(value.c_str());
    } else if (flag == "--mode" && (value == "block" || value == "epoll")) {
      event_loop = value == "epoll";
    } else {
      std::fprintf(stderr, "usage: %s [--jobs N] [--mode block|epoll]\n", argv[0]);
      return 2;
    }
  }
  std::uint16_t requests_port = 0, workers_port = 0;
  int requests_listener = listen_any(requests_port), workers_listener = listen_any(workers_port);
  std::thread broker(or_exit([&] { relay(requests_listener, workers_listener, jobs); }));

  Usage worker_usage, requester_usage;
  const auto start = std::chrono::steady_clock::now();
  std::thread worker(or_exit([&] {
    int fd = connect_to(workers_port);
    Reader reader(fd, event_loop);
    char frame[kFrame];
    for (int i = 0; i < jobs; ++i) {
      reader.read_frame(frame);
      frame[0] ^= 1;  // the handler
      transfer(fd, frame, kFrame, true);
    }
    worker_usage = thread_usage();
    close(fd);
  }));
  std::thread requester(or_exit([&] {
    int fd = connect_to(requests_port);
    Reader reader(fd, event_loop);
    char frame[kFrame];
    std::memset(frame, 'r', kFrame);
    int sent = 0;
    for (; sent < kHeldAtRelay && sent < jobs; ++sent) transfer(fd, frame, kFrame, true);
    for (int answered = 0; answered < jobs; ++answered) {
      reader.read_frame(frame);
      if (sent < jobs) {
        transfer(fd, frame, kFrame, true);
        ++sent;
      }
    }
    requester_usage = thread_usage();
    close(fd);
  }));
  worker.join();
  requester.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  broker.join();
  close(requests_listener);
  close(workers_listener);

  const double user = worker_usage.user + requester_usage.user,
               system = worker_usage.system + requester_usage.system;
  std::printf(
      "{\"mode\":\"%s\",\"jobs\":%d,\"jobs_per_sec\":%.0f,\"cpu_us_per_job\":%.1f,"
      "\"user_us_per_job\":%.1f,\"system_us_per_job\":%.1f,\"voluntary_switches_per_job\":%.2f}\n",
      event_loop ? "epoll" : "block", jobs, jobs / seconds, (user + system) / jobs * 1e6,
      user / jobs * 1e6, system / jobs * 1e6,
      static_cast<double>(worker_usage.switches + requester_usage.switches) / jobs);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "polybus_loopback_floor: %s\n", e.what());
  return 1;
}
