// SPDX-License-Identifier: Apache-2.0
// The HdrHistogram: its layout and percentile rule are HdrHistogram_c's and HdrHistogram_py's
// (values read back by those libraries give the same percentiles), its precision holds at every
// magnitude, and what it cannot hold is clamped and counted.
#include <catch2/catch.hpp>

#include <random>

#include "bench/hdr_histogram.hpp"

using polybus::bench::HdrHistogram;

TEST_CASE("hdr histogram: the latency layout is HdrHistogram's for 1 us to an hour at 3 digits") {
  const HdrHistogram h = HdrHistogram::for_latency_us();
  // 2048 sub-buckets (3 digits), 22 buckets to reach 3.6e9: (22 + 1) x 1024 counts.
  CHECK(h.counts_length() == 23552);
  CHECK(h.index_of(0) == 0);
  CHECK(h.index_of(2047) == 2047);
  CHECK(h.index_of(2048) == 2048);  // the second bucket: 1024 sub-buckets of width 2
  CHECK(h.index_of(2049) == 2048);
  CHECK(h.value_at_index(2048) == 2048);
  CHECK(h.lowest_equivalent(2049) == 2048);
  CHECK(h.highest_equivalent(2048) == 2049);
  CHECK(h.median_equivalent(2048) == 2049);
}

TEST_CASE("hdr histogram: exact below 2048, percentiles by HdrHistogram's rounding") {
  HdrHistogram h = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 1000; ++v) h.record(v);
  CHECK(h.total_count() == 1000);
  CHECK(h.value_at_percentile(50) == 500);
  CHECK(h.value_at_percentile(99) == 990);
  CHECK(h.value_at_percentile(99.9) == 999);
  CHECK(h.value_at_percentile(100) == 1000);
  CHECK(h.value_at_percentile(0) == 1);
  CHECK(h.max() == 1000);
  CHECK(h.min() == 1);
  CHECK(h.mean() == Approx(500.5));
  // 10 values, p94: round(9.4) = 9th value (HdrHistogram_c and _py; Java's ceil would say 10th).
  HdrHistogram ten = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 10; ++v) ten.record(v * 100);
  CHECK(ten.value_at_percentile(94) == 900);
}

TEST_CASE("hdr histogram: every value is kept to 3 significant digits up to an hour") {
  HdrHistogram h = HdrHistogram::for_latency_us();
  std::mt19937_64 random(7);
  for (int i = 0; i < 20000; ++i) {
    const auto value = static_cast<std::int64_t>(random() % 3'600'000'000ULL) + 1;
    const auto low = h.lowest_equivalent(value), high = h.highest_equivalent(value);
    REQUIRE(low <= value);
    REQUIRE(value <= high);
    REQUIRE(static_cast<double>(high - low + 1) <= static_cast<double>(value) / 1000.0 + 1);
    REQUIRE(h.index_of(value) < h.counts_length());
  }
}

TEST_CASE("hdr histogram: above the highest is clamped and counted, below zero is zero") {
  HdrHistogram h = HdrHistogram::for_latency_us();
  h.record(10'000'000'000LL);
  h.record(-5);
  CHECK(h.total_count() == 2);
  CHECK(h.clamped() == 1);
  CHECK(h.max() == h.highest_equivalent(3'600'000'000LL));
  CHECK(h.min() == 0);
}

TEST_CASE("hdr histogram: add_values takes another layout's values, as HdrHistogram's add does") {
  // OMB's Java worker: 60 s at 5 digits; polybus's coordinator adds into 1 h at 3.
  HdrHistogram java(1, 60'000'000, 5), merged = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 100'000; v += 7) java.record(v);
  java.record(59'000'000, 3);
  merged.add_values(java);
  CHECK(merged.total_count() == java.total_count());
  for (double p : {50.0, 90.0, 99.0, 99.99})
    CHECK(merged.value_at_percentile(p) == merged.highest_equivalent(java.value_at_percentile(p)));
  CHECK(merged.max() == merged.highest_equivalent(59'000'000));
  // Counts past 2^63 together are refused, whatever the layouts.
  HdrHistogram huge(1, 60'000'000, 5), full = HdrHistogram::for_latency_us();
  huge.record(5, INT64_MAX - 10);
  full.record(5, 11);
  CHECK_THROWS_WITH(full.add_values(huge), Catch::Contains("passes 2^63"));
  // The same layout: the plain sum.
  HdrHistogram same = HdrHistogram::for_latency_us();
  same.add_values(merged);
  CHECK(same.total_count() == merged.total_count());
}

TEST_CASE("hdr histogram: add sums counts, and refuses another layout") {
  HdrHistogram a = HdrHistogram::for_latency_us(), b = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 500; ++v) a.record(v);
  for (int v = 501; v <= 1000; ++v) b.record(v);
  a.add(b);
  CHECK(a.total_count() == 1000);
  CHECK(a.value_at_percentile(50) == 500);
  CHECK(a.max() == 1000);
  HdrHistogram full = HdrHistogram::for_latency_us();
  full.record(1, INT64_MAX - 10);
  HdrHistogram more = HdrHistogram::for_latency_us();
  more.record(1, 11);
  CHECK_THROWS_WITH(full.add(more), Catch::Contains("passes 2^63"));
  HdrHistogram other(1, 1'000'000, 2);
  CHECK_THROWS_WITH(a.add(other), Catch::Contains("another layout"));
  CHECK_THROWS_WITH(HdrHistogram(0, 100, 3), Catch::Contains("lowest 0"));
  CHECK_THROWS_WITH(HdrHistogram(1, 100, 6), Catch::Contains("digits 6"));
  a.reset();
  CHECK(a.total_count() == 0);
  CHECK(a.value_at_percentile(99) == 0);
  CHECK(a.max() == 0);
}
