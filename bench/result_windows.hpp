// SPDX-License-Identifier: Apache-2.0
// How a run, local or over workers, writes what it measured into OMB's result: the workload's
// fields, one window's
// rates, backlog and latency histograms (the series, the interval log, the progress line), and
// the whole test's histograms (the aggregated fields and quantile maps).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "hdr_histogram.hpp"
#include "histogram_log.hpp"
#include "omb_result.hpp"
#include "workload.hpp"

namespace polybus::bench {

// A result for a run of `workload` on `driver` (the result's name of it) at `url`, in windows of
// `window`: the workload's fields filled, the series empty.
OmbResult result_for(const Workload& workload, const std::string& driver, const std::string& url,
                     std::chrono::milliseconds window);

struct Window {
  const char* phase = "test";                             // "warm-up", "backlog", "drain" or "test"
  double start_seconds = 0;                               // since the load started
  double seconds = 0;                                     // its length
  std::uint64_t published = 0, errors = 0, received = 0;  // in the window
  std::int64_t backlog = 0;                               // at its end
  const HdrHistogram* publish = nullptr;                  // microseconds, each
  const HdrHistogram* delay = nullptr;
  const HdrHistogram* end_to_end = nullptr;
};

// Appends the window to the result's series and to `log` (when not null).
void record_window(OmbResult& result, const Window& window, HistogramLogWriter* log);
// The window as a line for people: rates, MB/s of `payload_size`-byte messages, backlog, latency.
std::string window_line(const Window& window, double payload_size);
// The test's whole histograms into the aggregated fields and quantile maps.
void record_totals(OmbResult& result, const HdrHistogram& publish, const HdrHistogram& delay,
                   const HdrHistogram& end_to_end);

}  // namespace polybus::bench
