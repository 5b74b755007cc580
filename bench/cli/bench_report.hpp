// SPDX-License-Identifier: Apache-2.0
// `polybus bench --compare`: the results of several URLs over several rounds, summarised as
// medians with their spread, printed as one table, and drawn as a picture (SVG, or HTML with the
// SVG inline).
#pragma once

#include <string>
#include <vector>

#include "bench_run.hpp"

namespace polybus::cli {

struct ComparedUrl {
  std::string label;        // what the user typed (a URL, or broker:NAME)
  std::string url;          // what was connected to
  bool in_process = false;  // an in-process test broker (broker:NAME, mem://)
  std::vector<BenchResult> rounds;
};

// The median and the smallest and largest of one figure over the rounds.
struct Spread {
  double median = 0, low = 0, high = 0;
};
Spread spread_of(const std::vector<BenchResult>& rounds, double (*figure)(const BenchResult&));

// The table: one row per URL.
std::string comparison_table(const std::vector<ComparedUrl>& urls);
// One JSON object per URL (medians and spreads), for machines.
std::string comparison_json(const ComparedUrl& url);
// The picture: throughput bars (median, whiskers from lowest to highest) and latency percentile
// curves (medians per percentile), one colour per URL, with axes, units and a legend.
std::string comparison_svg(const std::vector<ComparedUrl>& urls, const std::string& workload);
std::string comparison_html(const std::vector<ComparedUrl>& urls, const std::string& workload);

}  // namespace polybus::cli
