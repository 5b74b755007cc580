// SPDX-License-Identifier: Apache-2.0
// The NSQ schemes' option table (the core's options plus NSQ's, with go-nsq's defaults), and the
// values read from it once per client.
#pragma once

#include "machine.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/io/transport.hpp"

namespace polybus::nsq {

OptionTable option_table();

// Which nsqd a publisher writes each publish to (publish_strategy).
enum class PublishStrategy { least_pending, round_robin, failover };

struct Settings {
  MachineConfig machine;
  TransportSettings transport;
  std::chrono::milliseconds read_timeout{0};
  std::chrono::milliseconds lookupd_poll_interval{60000};
  double lookupd_poll_jitter = 0.3;
  // Discovery's dials: at most this many nsqd connections per subscription or publisher, this
  // many connection attempts at once (the rest wait for one to finish), started at this rate.
  std::size_t max_nsqd_connections = 100;
  std::size_t max_concurrent_dials = 16;
  std::size_t max_dials_per_second = 5000;
  std::chrono::milliseconds rdy_redistribute_interval{5000};
  std::chrono::milliseconds backoff_multiplier{1000};
  std::chrono::milliseconds max_backoff_duration{120000};
  bool backoff_full_jitter = false;
  PublishStrategy publish_strategy = PublishStrategy::least_pending;
  std::chrono::milliseconds max_requeue_delay{900000};

  static Settings from(const ResolvedOptions& options);
};

}  // namespace polybus::nsq
