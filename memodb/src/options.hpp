// SPDX-License-Identifier: Apache-2.0
// The memodb schemes' option table (the core's options plus memo01's timings, with the real
// broker's defaults), and the settings a connection reads from it once per client.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "polybus/adapter/adapter.hpp"
#include "polybus/adapter/registry.hpp"

namespace polybus::memodb::detail {

OptionTable option_table();

struct ConnectionSettings {
  std::string address;  // tcp://host:port, tcp://[v6]:port or ipc:///path (as NNG writes them)
  std::chrono::milliseconds heartbeat_interval{10'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds queue_timeout{10'000};
  std::chrono::milliseconds job_timeout{0};  // 0: each request's remaining deadline
  std::uint32_t max_requests = 8;
  std::size_t max_message = 16 << 20;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds frame_timeout{30'000};
  std::chrono::milliseconds write_timeout{10'000};
};

// Throws polybus::Error for an option or URL memo01 cannot take (TLS, a path on tcp, no port).
ConnectionSettings settings_for(const AdapterContext& context);

}  // namespace polybus::memodb::detail
