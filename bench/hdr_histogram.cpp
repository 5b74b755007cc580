// SPDX-License-Identifier: Apache-2.0
#include "hdr_histogram.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace polybus::bench {
namespace {

int bits_below(std::int64_t value) {  // floor(log2(value)) for value >= 1
  return 63 - __builtin_clzll(static_cast<unsigned long long>(value));
}

}  // namespace

HdrHistogram::HdrHistogram(std::int64_t lowest, std::int64_t highest, int significant_digits)
    : lowest_(lowest), highest_(highest), significant_digits_(significant_digits) {
  if (lowest < 1 || highest < 2 * lowest || significant_digits < 1 || significant_digits > 5)
    throw std::invalid_argument("histogram: lowest " + std::to_string(lowest) + ", highest " +
                                std::to_string(highest) + ", digits " +
                                std::to_string(significant_digits) +
                                " (needs lowest >= 1, highest >= 2 x lowest, digits 1 to 5)");
  // Single-unit resolution up to 2 x 10^digits: the sub-buckets that keeps `digits` digits.
  std::int64_t single_unit = 2;
  for (int i = 0; i < significant_digits; ++i) single_unit *= 10;
  const int sub_bucket_count_magnitude =
      static_cast<int>(std::ceil(std::log2(static_cast<double>(single_unit))));
  sub_bucket_half_count_magnitude_ = std::max(sub_bucket_count_magnitude, 1) - 1;
  unit_magnitude_ = bits_below(lowest);
  sub_bucket_count_ = 1 << (sub_bucket_half_count_magnitude_ + 1);
  sub_bucket_half_count_ = sub_bucket_count_ / 2;
  sub_bucket_mask_ = static_cast<std::int64_t>(sub_bucket_count_ - 1) << unit_magnitude_;
  std::int64_t smallest_untrackable = static_cast<std::int64_t>(sub_bucket_count_)
                                      << unit_magnitude_;
  bucket_count_ = 1;
  while (smallest_untrackable <= highest) {
    if (smallest_untrackable > INT64_MAX / 2) {
      ++bucket_count_;
      break;
    }
    smallest_untrackable <<= 1;
    ++bucket_count_;
  }
  counts_length_ = (bucket_count_ + 1) * sub_bucket_half_count_;
  counts_.assign(static_cast<std::size_t>(counts_length_), 0);
}

HdrHistogram HdrHistogram::for_latency_us() {
  return HdrHistogram(1, 3'600'000'000LL, 3);
}

std::int32_t HdrHistogram::bucket_index(std::int64_t value) const {
  const int pow2_ceiling =
      64 - __builtin_clzll(static_cast<unsigned long long>(value | sub_bucket_mask_));
  return pow2_ceiling - unit_magnitude_ - (sub_bucket_half_count_magnitude_ + 1);
}

std::int32_t HdrHistogram::index_of(std::int64_t value) const {
  const std::int32_t bucket = bucket_index(value);
  const auto sub_bucket = static_cast<std::int32_t>(value >> (bucket + unit_magnitude_));
  return ((bucket + 1) << sub_bucket_half_count_magnitude_) + (sub_bucket - sub_bucket_half_count_);
}

std::int64_t HdrHistogram::value_at_index(std::int32_t index) const {
  std::int32_t bucket = (index >> sub_bucket_half_count_magnitude_) - 1;
  std::int32_t sub_bucket = (index & (sub_bucket_half_count_ - 1)) + sub_bucket_half_count_;
  if (bucket < 0) {
    sub_bucket -= sub_bucket_half_count_;
    bucket = 0;
  }
  return static_cast<std::int64_t>(sub_bucket) << (bucket + unit_magnitude_);
}

std::int64_t HdrHistogram::equivalent_range(std::int64_t value) const {
  const std::int32_t bucket = bucket_index(value);
  const auto sub_bucket = static_cast<std::int32_t>(value >> (bucket + unit_magnitude_));
  const std::int32_t adjusted = sub_bucket >= sub_bucket_count_ ? bucket + 1 : bucket;
  return std::int64_t{1} << (unit_magnitude_ + adjusted);
}

std::int64_t HdrHistogram::lowest_equivalent(std::int64_t value) const {
  const std::int32_t bucket = bucket_index(value);
  const auto sub_bucket = value >> (bucket + unit_magnitude_);
  return sub_bucket << (bucket + unit_magnitude_);
}

std::int64_t HdrHistogram::highest_equivalent(std::int64_t value) const {
  return lowest_equivalent(value) + equivalent_range(value) - 1;
}

std::int64_t HdrHistogram::median_equivalent(std::int64_t value) const {
  return lowest_equivalent(value) + (equivalent_range(value) >> 1);
}

void HdrHistogram::record(std::int64_t value, std::int64_t count) {
  if (count <= 0) return;
  if (value < 0) value = 0;
  if (value > highest_) {
    value = highest_;
    clamped_ += count;
  }
  counts_[static_cast<std::size_t>(index_of(value))] += count;
  total_count_ += count;
  min_value_ = std::min(min_value_, value);
  max_value_ = std::max(max_value_, value);
}

void HdrHistogram::set_count_at_index(std::int32_t index, std::int64_t count) {
  auto& slot = counts_[static_cast<std::size_t>(index)];
  total_count_ += count - slot;
  slot = count;
  if (count > 0) {
    const std::int64_t value = value_at_index(index);
    min_value_ = std::min(min_value_, value);
    max_value_ = std::max(max_value_, value);
  }
}

void HdrHistogram::add(const HdrHistogram& other) {
  if (other.lowest_ != lowest_ || other.highest_ != highest_ ||
      other.significant_digits_ != significant_digits_)
    throw std::invalid_argument("histogram: adding one of another layout (lowest " +
                                std::to_string(other.lowest_) + ", highest " +
                                std::to_string(other.highest_) + ", digits " +
                                std::to_string(other.significant_digits_) + ")");
  if (other.total_count_ > INT64_MAX - total_count_)
    throw std::overflow_error("histogram: adding " + std::to_string(other.total_count_) +
                              " values to " + std::to_string(total_count_) + " passes 2^63");
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  total_count_ += other.total_count_;
  clamped_ += other.clamped_;
  if (other.total_count_) {
    min_value_ = std::min(min_value_, other.min_value_);
    max_value_ = std::max(max_value_, other.max_value_);
  }
}

void HdrHistogram::add_values(const HdrHistogram& other) {
  if (other.lowest_ == lowest_ && other.highest_ == highest_ &&
      other.significant_digits_ == significant_digits_)
    return add(other);
  if (other.total_count_ > INT64_MAX - total_count_)
    throw std::overflow_error("histogram: adding " + std::to_string(other.total_count_) +
                              " values to " + std::to_string(total_count_) + " passes 2^63");
  const std::int32_t last = other.max_index();
  for (std::int32_t i = 0; i <= last; ++i)
    if (const std::int64_t count = other.counts_[static_cast<std::size_t>(i)])
      record(other.value_at_index(i), count);
}

void HdrHistogram::reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  total_count_ = clamped_ = 0;
  min_value_ = INT64_MAX;
  max_value_ = 0;
}

std::int32_t HdrHistogram::max_index() const {
  return total_count_ ? index_of(max_value_) : -1;
}

std::int64_t HdrHistogram::value_at_percentile(double percentile) const {
  if (total_count_ == 0) return 0;
  const double requested = std::min(std::max(percentile, 0.0), 100.0);
  const auto target = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(requested * static_cast<double>(total_count_) / 100 + 0.5));
  std::int64_t seen = 0;
  for (std::int32_t i = 0; i < counts_length_; ++i) {
    seen += counts_[static_cast<std::size_t>(i)];
    if (seen >= target) {
      const std::int64_t value = value_at_index(i);
      return percentile > 0 ? highest_equivalent(value) : lowest_equivalent(value);
    }
  }
  return 0;
}

std::int64_t HdrHistogram::max() const {
  return total_count_ ? highest_equivalent(max_value_) : 0;
}

std::int64_t HdrHistogram::min() const {
  return total_count_ ? lowest_equivalent(min_value_) : 0;
}

double HdrHistogram::mean() const {
  if (total_count_ == 0) return 0;
  double sum = 0;
  for (std::int32_t i = 0; i <= max_index(); ++i)
    if (const auto count = counts_[static_cast<std::size_t>(i)])
      sum += static_cast<double>(count) * static_cast<double>(median_equivalent(value_at_index(i)));
  return sum / static_cast<double>(total_count_);
}

}  // namespace polybus::bench
