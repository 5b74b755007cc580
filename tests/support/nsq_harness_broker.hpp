// SPDX-License-Identifier: Apache-2.0
// Real nsqd and nsqlookupd 1.3 for tests: the Go harness in tests/harness/nsq, run as a child
// process. POLYBUS_NSQ_HARNESS names its binary (.ci/test builds it); without it, tests that
// need the real servers report themselves skipped.
#pragma once

#include <string>
#include <vector>

namespace polybus::test {

// The harness binary, or empty.
std::string nsq_harness_binary();

// One harness process: nsqd and (unless -no-lookupd) nsqlookupd on loopback. Its data directory
// outlives restarts, so a restarted nsqd keeps its queues, as a real deployment does.
class NsqHarness {
 public:
  // extra: more harness flags (e.g. -no-lookupd, -join-lookupd ADDR, -tls-cert FILE).
  explicit NsqHarness(std::vector<std::string> extra = {});
  ~NsqHarness();
  NsqHarness(const NsqHarness&) = delete;
  NsqHarness& operator=(const NsqHarness&) = delete;

  void stop();   // SIGTERM: nsqd writes its queues to the data dir and unregisters from lookupd
  void start();  // again, on the same ports and data dir
  bool running() const { return pid_ > 0; }

  const std::string& nsqd_tcp() const { return nsqd_tcp_; }  // "127.0.0.1:port"
  const std::string& nsqd_http() const { return nsqd_http_; }
  const std::string& lookupd_tcp() const { return lookupd_tcp_; }
  const std::string& lookupd_http() const { return lookupd_http_; }

 private:
  void launch(bool first);
  void launch_once(bool first);

  std::vector<std::string> extra_;
  std::string data_dir_;
  int pid_ = -1;
  int stdin_ = -1;
  std::string nsqd_tcp_, nsqd_http_, lookupd_tcp_, lookupd_http_;
};

// Registers "nsq-real" and "nsq+lookupd-real" test brokers for the contract suite; returns
// false (and registers nothing) when POLYBUS_NSQ_HARNESS is not set.
bool register_real_nsq_brokers();

}  // namespace polybus::test
