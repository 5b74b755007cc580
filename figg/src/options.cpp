// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

namespace polybus::figg {

OptionTable option_table() {
  OptionTable table = core_option_table();
  // The Figg Go SDK's reconnect policy: 1 s doubling to 30 s, with jitter.
  table.set_default("reconnect_backoff", "exponential_jitter");
  table.set_default("reconnect_initial", "1s");
  table.set_default("reconnect_max", "30s");
  table.add({
      {"window", OptionType::integer, "1024", 1, 1 << 20,
       "unacknowledged publishes kept for resending; publish waits while it is full"},
      {"ping_interval", OptionType::duration, "2s", 0, 3'600'000,
       "PING period (0: none); a server that answers PING is dropped after two unanswered"},
  });
  return table;
}

}  // namespace polybus::figg
