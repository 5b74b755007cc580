// SPDX-License-Identifier: Apache-2.0
// What a workload run prints and draws: its summary lines, and the report of its windows (publish
// and consume rates, p99 publish and end-to-end latency per window, one line per URL).
#pragma once

#include <string>
#include <vector>

#include "omb_result.hpp"

namespace polybus::bench {

// Totals and aggregated percentiles, then one JSON line (the aggregated figures, for machines).
std::string summary_lines(const OmbResult& result);
std::string workload_svg(const std::vector<OmbResult>& results);
std::string workload_html(const std::vector<OmbResult>& results);

}  // namespace polybus::bench
