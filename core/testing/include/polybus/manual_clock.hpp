// SPDX-License-Identifier: Apache-2.0
// Time a test controls, for the in-process brokers: start one with a ManualClock and what it does
// at a time (NSQ's message timeouts, REQ delays and deferred publishes; MemoDB's job timeouts;
// mem's ack timeouts and deferrals; QuickIO's callback expiry; nsqlookupd's tombstones) happens
// only as the test advances the clock, in order, before advance() returns. Heartbeats and pings
// stay on the real clock, so connections stay alive however the test moves time.
//
//   auto clock = std::make_shared<polybus::testing::ManualClock>();
//   options.clock = clock;
//   ...
//   clock->advance(std::chrono::seconds(60));  // the message times out and is delivered again
#pragma once

#include "polybus/io/manual_clock.hpp"

namespace polybus::testing {

/// polybus::io::ManualClock, under the name tests use.
using ManualClock = polybus::io::ManualClock;

}  // namespace polybus::testing
