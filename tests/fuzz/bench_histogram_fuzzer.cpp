// SPDX-License-Identifier: Apache-2.0
// The bench's HdrHistogram decoders (bench/histogram_codec.hpp, bench/histogram_log.hpp), as a
// log from another machine reaches `polybus bench merge`. The input is tried as a V2 compressed
// histogram, as its base64 and as a whole interval log.
// Checks: bad input is refused with std::runtime_error only; a decoded histogram's counts add
// up to its total, its percentiles climb with the percentile, and it encodes and decodes to the
// same counts; a merged log's tags are histograms of the same kind.
#include <sstream>
#include <stdexcept>

#include "bench/histogram_codec.hpp"
#include "bench/histogram_log.hpp"
#include "fuzz_util.hpp"

using namespace polybus::bench;

namespace {

void check(const HdrHistogram& h) {
  std::int64_t total = 0;
  for (std::int32_t i = 0; i < h.counts_length(); ++i) total += h.count_at_index(i);
  FUZZ_CHECK(total == h.total_count());
  std::int64_t last = 0;
  for (double p : {0.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
    const std::int64_t v = h.value_at_percentile(p);
    FUZZ_CHECK(v >= last || p == 0.0);
    last = v;
  }
  const HdrHistogram back = decode_compressed(encode_compressed(h));
  FUZZ_CHECK(back.total_count() == h.total_count());
  for (std::int32_t i = 0; i < h.counts_length(); ++i)
    FUZZ_CHECK(back.count_at_index(i) == h.count_at_index(i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // Small layouts only: a fuzzer's histogram of the default's 1 M buckets would spend its time
  // clearing memory.
  constexpr std::int32_t kMaxCounts = 1 << 16;
  try {
    check(decode_compressed(input, kMaxCounts));
  } catch (const std::runtime_error&) {
  }
  try {
    check(decode_compressed_base64(input, kMaxCounts));
  } catch (const std::runtime_error&) {
  }
  try {
    std::istringstream log{std::string(input)};
    MergedLogs merged;
    merge_histogram_log(log, "fuzz.hlog", merged);
    for (const auto& [tag, h] : merged.by_tag) FUZZ_CHECK(h.total_count() >= 0);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
