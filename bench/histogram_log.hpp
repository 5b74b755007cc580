// SPDX-License-Identifier: Apache-2.0
// HdrHistogram's interval log (format 1.3, as HistogramLogWriter writes it and HdrHistogram's
// readers and log tools read it): a few "#[...]" header lines, a CSV legend, then one line per
// histogram and interval: "Tag=NAME,start,length,max,BASE64" with start and length in seconds from
// the log's base time and max in milliseconds (the values are microseconds).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>

#include "hdr_histogram.hpp"

namespace polybus::bench {

class HistogramLogWriter {
 public:
  // `start_epoch_seconds`: the run's start, wall clock; every interval is timed from it.
  HistogramLogWriter(std::ostream& out, double start_epoch_seconds, std::string_view comment);
  void write(std::string_view tag, double start_seconds, double length_seconds,
             const HdrHistogram& histogram);

 private:
  std::ostream& out_;
};

// Every histogram of one or more logs, added up per tag (a line without a tag counts under "").
struct MergedLogs {
  std::map<std::string, HdrHistogram> by_tag;
  std::uint64_t intervals = 0;
};
// Reads one log into `merged`. Throws std::runtime_error naming the file, the line and what was
// wrong (not a histogram log, a bad histogram, a line over 16 MB, more than 256 tags).
void merge_histogram_log(std::istream& in, const std::string& name, MergedLogs& merged);

}  // namespace polybus::bench
