// SPDX-License-Identifier: Apache-2.0
// A High Dynamic Range histogram (Gil Tene's HdrHistogram, https://hdrhistogram.github.io/): a
// fixed array of counts whose buckets keep a value's first `significant_digits` decimal digits at
// every magnitude, so that 3 digits cover 1 us to an hour in 190 KB and recording is an index and
// an add. Laid out as HdrHistogram_c and HdrHistogram_py lay theirs out (the same bucket index of
// every value, the same percentile rule), so that a histogram polybus encodes reads back in those
// libraries with the same percentiles. Not thread-safe: one recorder, or a lock around it.
#pragma once

#include <cstdint>
#include <vector>

namespace polybus::bench {

class HdrHistogram {
 public:
  // lowest >= 1, highest >= 2 * lowest, significant_digits 1 to 5. Throws std::invalid_argument.
  HdrHistogram(std::int64_t lowest, std::int64_t highest, int significant_digits);
  // Microseconds from 1 us to an hour, 3 significant digits: what the bench records.
  static HdrHistogram for_latency_us();

  // A value above highest() is clamped to it and counted in clamped() (a stall of over an hour
  // still counts, at the top); a negative value counts as 0.
  void record(std::int64_t value, std::int64_t count = 1);
  // Adds every count of `other` (the same layout: lowest, highest and digits; else
  // std::invalid_argument; std::overflow_error when the total would pass 2^63).
  void add(const HdrHistogram& other);
  // Adds every value of `other`, whatever its layout, as HdrHistogram's own add does across
  // layouts: each bucket's lowest value with its count (values past highest() clamp). What a
  // coordinator does with workers' histograms of another precision or range.
  void add_values(const HdrHistogram& other);
  void reset();

  std::int64_t total_count() const { return total_count_; }
  std::int64_t clamped() const { return clamped_; }
  // HdrHistogram's rule: the highest value equivalent to the one at which the cumulative count
  // reaches round(percentile% of the total) (at least 1); 0 for an empty histogram.
  std::int64_t value_at_percentile(double percentile) const;
  std::int64_t max() const;  // the highest equivalent value of the largest recorded; 0 if empty
  std::int64_t min() const;  // the lowest equivalent value of the smallest recorded
  double mean() const;       // from the median equivalent value of each bucket

  std::int64_t lowest() const { return lowest_; }
  std::int64_t highest() const { return highest_; }
  int significant_digits() const { return significant_digits_; }
  std::int32_t counts_length() const { return counts_length_; }
  std::int64_t count_at_index(std::int32_t index) const { return counts_[index]; }
  // Sets one count (a decoder filling a histogram); keeps the total, min and max right.
  void set_count_at_index(std::int32_t index, std::int64_t count);
  // The index of the largest recorded value, -1 if empty (where an encoding's counts end).
  std::int32_t max_index() const;

  std::int32_t index_of(std::int64_t value) const;
  std::int64_t value_at_index(std::int32_t index) const;
  std::int64_t lowest_equivalent(std::int64_t value) const;
  std::int64_t highest_equivalent(std::int64_t value) const;
  std::int64_t median_equivalent(std::int64_t value) const;

 private:
  std::int32_t bucket_index(std::int64_t value) const;
  std::int64_t equivalent_range(std::int64_t value) const;

  std::int64_t lowest_, highest_;
  int significant_digits_;
  std::int32_t unit_magnitude_ = 0, sub_bucket_half_count_magnitude_ = 0, sub_bucket_count_ = 0,
               sub_bucket_half_count_ = 0, bucket_count_ = 0, counts_length_ = 0;
  std::int64_t sub_bucket_mask_ = 0;
  std::vector<std::int64_t> counts_;
  std::int64_t total_count_ = 0, clamped_ = 0;
  std::int64_t min_value_ = INT64_MAX, max_value_ = 0;
};

}  // namespace polybus::bench
