#include "nsq_harness_broker.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

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

std::string port_of(const std::string& address) { return address.substr(address.rfind(':') + 1); }

// The harness as a child process. Its stdin is a pipe we hold: if this process dies, the pipe
// closes and the harness shuts itself down.
class HarnessProcess {
 public:
  void start(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    // One JSON line with the bound addresses; the harness is listening once it is printed.
    line_.clear();
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line_.push_back(c);
    close(out[0]);
    if (line_.empty()) {
      stop();
      throw std::runtime_error("the nsq harness printed no addresses (is " + args[0] + " built?)");
    }
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  ~HarnessProcess() { stop(); }
  const std::string& line() const { return line_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string line_;
};

class RealNsqBroker : public testing::TestBroker {
 public:
  explicit RealNsqBroker(bool via_lookupd) : via_lookupd_(via_lookupd) {
    char pattern[] = "/tmp/polybus-nsqd-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    data_dir_ = pattern;
    launch("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0");
    nsqd_tcp_ = json_field(process_.line(), "nsqd_tcp");
    nsqd_http_ = json_field(process_.line(), "nsqd_http");
    lookupd_tcp_ = json_field(process_.line(), "lookupd_tcp");
    lookupd_http_ = json_field(process_.line(), "lookupd_http");
  }
  ~RealNsqBroker() override {
    process_.stop();
    std::error_code ignored;
    std::filesystem::remove_all(data_dir_, ignored);
  }
  std::string url() const override {
    const std::string fast = "reconnect_initial=10ms&reconnect_max=200ms&msg_timeout=1s";
    if (via_lookupd_)
      return "nsq+lookupd://127.0.0.1:" + port_of(lookupd_http_) + "?lookupd_poll_interval=100ms&" + fast;
    return "nsq://127.0.0.1:" + port_of(nsqd_tcp_) + "?" + fast;
  }
  // nsqd exits cleanly (its queues go to the data dir) and comes back on the same ports.
  void stop() override { process_.stop(); }
  void start() override { launch(nsqd_tcp_, nsqd_http_, lookupd_tcp_, lookupd_http_); }

 private:
  void launch(const std::string& tcp, const std::string& http, const std::string& ltcp,
              const std::string& lhttp) {
    process_.start({nsq_harness_binary(), "-nsqd-tcp", tcp, "-nsqd-http", http, "-lookupd-tcp", ltcp,
                    "-lookupd-http", lhttp, "-data-dir", data_dir_});
  }

  bool via_lookupd_;
  std::string data_dir_;
  HarnessProcess process_;
  std::string nsqd_tcp_, nsqd_http_, lookupd_tcp_, lookupd_http_;
};

}  // namespace

std::string nsq_harness_binary() {
  const char* path = std::getenv("POLYBUS_NSQ_HARNESS");
  return path && *path ? std::string(path) : std::string();
}

bool register_real_nsq_brokers() {
  if (nsq_harness_binary().empty()) return false;
  testing::register_test_broker({"nsq-real", "nsq", [] { return std::make_unique<RealNsqBroker>(false); }});
  testing::register_test_broker(
      {"nsq+lookupd-real", "nsq+lookupd", [] { return std::make_unique<RealNsqBroker>(true); }});
  return true;
}

}  // namespace polybus::test
