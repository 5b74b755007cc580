// SPDX-License-Identifier: Apache-2.0
#include "nsq_harness_broker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <thread>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "polybus/testing.hpp"

namespace polybus::test {
namespace {

std::string json_field(const std::string& line, const std::string& name) {
  auto key = "\"" + name + "\":\"";
  auto at = line.find(key);
  if (at == std::string::npos) return {};
  auto start = at + key.size();
  return line.substr(start, line.find('"', start) - start);
}

std::string port_of(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

}  // namespace

std::string nsq_harness_binary() {
  const char* path = std::getenv("POLYBUS_NSQ_HARNESS");
  return path && *path ? std::string(path) : std::string();
}

NsqHarness::NsqHarness(std::vector<std::string> extra) : extra_(std::move(extra)) {
  if (nsq_harness_binary().empty()) throw std::runtime_error("POLYBUS_NSQ_HARNESS is not set");
  char pattern[] = "/tmp/polybus-nsqd-XXXXXX";
  if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  data_dir_ = pattern;
  launch(true);
}

NsqHarness::~NsqHarness() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(data_dir_, ignored);
}

void NsqHarness::launch(bool first) {
  // A restart listens on the same ports again; meanwhile any socket of another test may have
  // been given one of them (a client's local port comes from the same range), and the harness
  // then exits with "address already in use". Such a socket is short-lived: try again, backing
  // off 10, 20, 40 ... 320 ms between attempts, about 5 s in all.
  const int attempts = first ? 1 : 20;
  auto pause = std::chrono::milliseconds(10);
  for (int attempt = 1;; ++attempt) {
    try {
      launch_once(first);
      return;
    } catch (const std::runtime_error&) {
      if (attempt >= attempts) throw;
    }
    std::this_thread::sleep_for(pause);  // a backoff after a failed bind, not a synchronisation
    pause = std::min(pause * 2, std::chrono::milliseconds(320));
  }
}

void NsqHarness::launch_once(bool first) {
  std::vector<std::string> args{nsq_harness_binary(), "-data-dir", data_dir_};
  auto address = [&](const char* flag, const std::string& known) {
    args.push_back(flag);
    args.push_back(first || known.empty() ? "127.0.0.1:0" : known);
  };
  address("-nsqd-tcp", nsqd_tcp_);
  address("-nsqd-http", nsqd_http_);
  address("-lookupd-tcp", lookupd_tcp_);
  address("-lookupd-http", lookupd_http_);
  // nsqd scans a new channel for deferred and timed-out messages only after its next refresh
  // (5 s by default): tests would wait that out on every new topic.
  args.insert(args.end(), {"-queue-scan-refresh-interval", "100ms"});
  args.insert(args.end(), extra_.begin(), extra_.end());
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  // posix_spawn, not fork(): a restart launches while the client's threads run, and a fork
  // copies the locks they hold (the allocator's, AddressSanitizer's), which the child may then
  // wait on for ever before it reaches exec.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t child = -1;
  const int spawned = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (spawned != 0) {
    close(in[1]);
    close(out[0]);
    throw std::runtime_error("cannot start the nsq harness " + args[0] + ": " +
                             std::strerror(spawned));
  }
  pid_ = child;
  // Our end of its stdin: if this process dies, the harness sees EOF and shuts down.
  stdin_ = in[1];
  // One JSON line with the bound addresses; the servers listen once it is printed. A bound on
  // the wait: a harness that neither prints nor exits is ended, and the launch tried again.
  std::string line;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool ended = false;
  while (!ended) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    pollfd readable{out[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      line.clear();
      break;
    }
    char c;
    if (read(out[0], &c, 1) != 1 || c == '\n')
      ended = true;
    else
      line.push_back(c);
  }
  close(out[0]);
  if (line.empty()) {
    stop();
    throw std::runtime_error("the nsq harness printed no addresses within 30 s (" + args[0] + ")");
  }
  nsqd_tcp_ = json_field(line, "nsqd_tcp");
  nsqd_http_ = json_field(line, "nsqd_http");
  lookupd_tcp_ = json_field(line, "lookupd_tcp");
  lookupd_http_ = json_field(line, "lookupd_http");
}

void NsqHarness::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

void NsqHarness::start() {
  if (pid_ <= 0) launch(false);
}

namespace {

class RealNsqBroker : public testing::TestBroker {
 public:
  explicit RealNsqBroker(bool via_lookupd) : via_lookupd_(via_lookupd) {}
  std::string url() const override {
    const std::string fast =
        "reconnect_initial=10ms&reconnect_max=200ms&msg_timeout=1s&backoff_multiplier=10ms";
    if (via_lookupd_)
      return "nsq+lookupd://127.0.0.1:" + port_of(harness_.lookupd_http()) +
             "?lookupd_poll_interval=100ms&" + fast;
    return "nsq://127.0.0.1:" + port_of(harness_.nsqd_tcp()) + "?" + fast;
  }
  void stop() override { harness_.stop(); }
  void start() override { harness_.start(); }

 private:
  bool via_lookupd_;
  NsqHarness harness_;
};

}  // namespace

bool register_real_nsq_brokers() {
  if (nsq_harness_binary().empty()) return false;
  testing::register_test_broker(
      {"nsq-real", "nsq", [] { return std::make_unique<RealNsqBroker>(false); }});
  testing::register_test_broker(
      {"nsq+lookupd-real", "nsq+lookupd", [] { return std::make_unique<RealNsqBroker>(true); }});
  return true;
}

}  // namespace polybus::test
