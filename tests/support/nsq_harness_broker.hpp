// Real nsqd and nsqlookupd 1.3 for the contract suite: the Go harness in tests/harness/nsq, run
// as a child process. Registered as "nsq-real" and "nsq+lookupd-real" when POLYBUS_NSQ_HARNESS
// names its binary (.ci/test builds it); otherwise nothing is registered and the real-peer
// tests report themselves skipped.
#pragma once

#include <string>

namespace polybus::test {

// Returns false (and registers nothing) when POLYBUS_NSQ_HARNESS is not set.
bool register_real_nsq_brokers();

// The harness binary, or empty.
std::string nsq_harness_binary();

}  // namespace polybus::test
