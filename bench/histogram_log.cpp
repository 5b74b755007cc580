// SPDX-License-Identifier: Apache-2.0
#include "histogram_log.hpp"

#include <ctime>
#include <istream>
#include <optional>
#include <stdexcept>

#include "histogram_codec.hpp"

namespace polybus::bench {
namespace {

std::string seconds_text(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  return text;
}

}  // namespace

HistogramLogWriter::HistogramLogWriter(std::ostream& out, double start_epoch_seconds,
                                       std::string_view comment)
    : out_(out) {
  const auto whole = static_cast<std::time_t>(start_epoch_seconds);
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char date[64];
  std::strftime(date, sizeof date, "%a %b %d %H:%M:%S UTC %Y", &utc);
  if (!comment.empty()) out_ << "#" << comment << "\n";
  out_ << "#[Histogram log format version 1.3]\n";
  out_ << "#[StartTime: " << seconds_text(start_epoch_seconds) << " (seconds since epoch), " << date
       << "]\n";
  out_ << "#[BaseTime: " << seconds_text(start_epoch_seconds) << " (seconds since epoch)]\n";
  out_ << "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_"
          "Histogram\"\n";
  out_.flush();
}

void HistogramLogWriter::write(std::string_view tag, double start_seconds, double length_seconds,
                               const HdrHistogram& histogram) {
  if (!tag.empty()) out_ << "Tag=" << tag << ",";
  out_ << seconds_text(start_seconds) << "," << seconds_text(length_seconds) << ","
       << seconds_text(static_cast<double>(histogram.max()) / 1000.0) << ","
       << encode_compressed_base64(histogram) << "\n";
  out_.flush();  // an interrupted run keeps every interval written so far
}

void merge_histogram_log(std::istream& in, const std::string& name, MergedLogs& merged) {
  constexpr std::size_t kMaxLine = 16 << 20;
  constexpr std::size_t kMaxTags = 256;
  std::string line;
  std::uint64_t number = 0;
  bool legend = false;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(name + ":" + std::to_string(number) + ": " + what);
  };
  while (true) {
    line.clear();
    // Read with a bound: getline alone would take a line of any length into memory.
    char c;
    bool any = false;
    while (in.get(c)) {
      any = true;
      if (c == '\n') break;
      if (line.size() == kMaxLine) {
        ++number;
        fail("a line longer than 16 MB");
      }
      line.push_back(c);
    }
    if (!any) break;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("\"StartTimestamp\"", 0) == 0) {
      legend = true;
      continue;
    }
    std::string_view rest(line);
    std::string tag;
    if (rest.rfind("Tag=", 0) == 0) {
      const auto comma = rest.find(',');
      if (comma == std::string_view::npos) fail("a tag and nothing after it");
      tag = std::string(rest.substr(4, comma - 4));
      rest.remove_prefix(comma + 1);
    }
    // start, length, max, then the histogram.
    std::size_t field = 0;
    for (int i = 0; i < 3; ++i) {
      const auto comma = rest.find(',', field);
      if (comma == std::string_view::npos)
        fail(legend ? "fewer than 4 fields" : "not an HdrHistogram interval log line");
      field = comma + 1;
    }
    std::optional<HdrHistogram> decoded;
    try {
      decoded.emplace(decode_compressed_base64(rest.substr(field)));
    } catch (const std::exception& e) {
      fail(e.what());
    }
    HdrHistogram& h = *decoded;
    auto found = merged.by_tag.find(tag);
    // Each tag holds a histogram: a log naming thousands is not one polybus or HdrHistogram's
    // tools write, and would take memory without bound.
    if (found == merged.by_tag.end() && merged.by_tag.size() == kMaxTags)
      fail("more than " + std::to_string(kMaxTags) + " tags");
    if (found == merged.by_tag.end())
      merged.by_tag.emplace(tag, std::move(h));
    else
      try {
        found->second.add(h);
      } catch (const std::exception& e) {
        fail(e.what());
      }
    ++merged.intervals;
  }
  if (!legend && merged.intervals == 0) {
    number = 0;
    fail("no HdrHistogram log legend or interval found");
  }
}

}  // namespace polybus::bench
