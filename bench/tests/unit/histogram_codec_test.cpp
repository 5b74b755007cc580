// SPDX-License-Identifier: Apache-2.0
// HdrHistogram's V2 compressed encoding: what polybus writes decodes to the same counts, the
// bytes are those HdrHistogram's libraries expect (cookies, big-endian header, zlib), and input
// from elsewhere is bounded: a bad cookie, a lie about a length, a layout too large, a run of
// empty buckets past the end or a zlib bomb is refused with what was wrong.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <sstream>

#include "bench/histogram_codec.hpp"
#include "bench/histogram_log.hpp"
#include "polybus/text/big_endian.hpp"
#include "polybus/text/text.hpp"

using namespace polybus::bench;

namespace {

HdrHistogram sample() {
  HdrHistogram h = HdrHistogram::for_latency_us();
  for (int v = 1; v <= 3000; v += 3) h.record(v, v % 7 + 1);
  h.record(1'000'000);
  h.record(3'000'000'000LL, 2);
  return h;
}

// A compressed encoding around `inner`, as HdrHistogram's writers frame it.
std::string frame(const std::string& inner) {
  uLongf size = compressBound(static_cast<uLong>(inner.size()));
  std::string packed(size, '\0');
  compress(reinterpret_cast<Bytef*>(packed.data()), &size,
           reinterpret_cast<const Bytef*>(inner.data()), static_cast<uLong>(inner.size()));
  packed.resize(size);
  std::string out;
  polybus::append_big_endian<4>(out, 0x1c849314);
  polybus::append_big_endian<4>(out, packed.size());
  return out + packed;
}

std::string inner_header(std::uint32_t payload, std::int64_t lowest, std::int64_t highest,
                         int digits) {
  std::string out;
  polybus::append_big_endian<4>(out, 0x1c849313);
  polybus::append_big_endian<4>(out, payload);
  polybus::append_big_endian<4>(out, 0);
  polybus::append_big_endian<4>(out, static_cast<std::uint64_t>(digits));
  polybus::append_big_endian<8>(out, static_cast<std::uint64_t>(lowest));
  polybus::append_big_endian<8>(out, static_cast<std::uint64_t>(highest));
  polybus::append_big_endian<8>(out, 0x3ff0000000000000ULL);  // 1.0
  return out;
}

}  // namespace

TEST_CASE("histogram codec: a round trip keeps every count") {
  const HdrHistogram h = sample();
  const std::string bytes = encode_compressed(h);
  CHECK(polybus::read_big_endian<4>(bytes.data()) == 0x1c849314);
  CHECK(polybus::read_big_endian<4>(bytes.data() + 4) == bytes.size() - 8);
  CHECK(static_cast<unsigned char>(bytes[8]) == 0x78);  // a zlib stream, not raw deflate
  const HdrHistogram back = decode_compressed(bytes);
  REQUIRE(back.total_count() == h.total_count());
  for (std::int32_t i = 0; i < h.counts_length(); ++i)
    REQUIRE(back.count_at_index(i) == h.count_at_index(i));
  for (double p : {50.0, 90.0, 99.0, 99.9, 100.0})
    CHECK(back.value_at_percentile(p) == h.value_at_percentile(p));
  CHECK(back.max() == h.max());
  // base64, as a log line carries it: "HISTF..." for HdrHistogram's compressed cookie.
  const std::string text = encode_compressed_base64(h);
  CHECK(text.rfind("HISTF", 0) == 0);
  CHECK(decode_compressed_base64(text).total_count() == h.total_count());
}

TEST_CASE("histogram codec: an empty histogram and one zero between counts") {
  const HdrHistogram empty = HdrHistogram::for_latency_us();
  CHECK(decode_compressed(encode_compressed(empty)).total_count() == 0);
  HdrHistogram gap = HdrHistogram::for_latency_us();
  gap.record(1);
  gap.record(3);
  const HdrHistogram back = decode_compressed(encode_compressed(gap));
  CHECK(back.count_at_index(1) == 1);
  CHECK(back.count_at_index(2) == 0);
  CHECK(back.count_at_index(3) == 1);
}

TEST_CASE("histogram codec: a single empty bucket written as -1 (HdrHistogram_c) is read too") {
  std::string counts;
  counts.push_back(2);  // zigzag(1): index 0 has 1
  counts.push_back(1);  // zigzag(-1): one empty bucket
  counts.push_back(4);  // zigzag(2): index 2 has 2
  const std::string inner =
      inner_header(static_cast<std::uint32_t>(counts.size()), 1, 3'600'000'000LL, 3) + counts;
  const HdrHistogram back = decode_compressed(frame(inner));
  CHECK(back.total_count() == 3);
  CHECK(back.count_at_index(2) == 2);
}

TEST_CASE("histogram codec: hostile encodings are refused with what was wrong") {
  const std::string good = encode_compressed(sample());
  CHECK_THROWS_WITH(decode_compressed(good.substr(0, 5)),
                    Catch::Contains("shorter than its header"));
  std::string cookie = good;
  cookie[0] = 0x11;
  CHECK_THROWS_WITH(decode_compressed(cookie), Catch::Contains("cookie"));
  CHECK_THROWS_WITH(decode_compressed(good.substr(0, good.size() - 3)),
                    Catch::Contains("compressed bytes follow"));
  std::string corrupt = good;
  corrupt[good.size() / 2] ^= 0x5a;
  CHECK_THROWS(decode_compressed(corrupt));
  // A layout of more buckets than allowed: 5 digits from 1 to 2^62.
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(0, 1, std::int64_t{1} << 62, 5))),
                    Catch::Contains("buckets"));
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(0, 0, 100, 3))),
                    Catch::Contains("out of range"));
  // A run of empty buckets past the last.
  std::string run;
  polybus::append_big_endian<1>(run, 0xff);  // zigzag varint of a large negative: 0xff 0xff 0x03
  run += std::string("\xff\x03", 2);
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(3, 1, 3'600'000'000LL, 3) + run)),
                    Catch::Contains("passes the last"));
  // A count cut short: a continuation bit and nothing after it.
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(1, 1, 3'600'000'000LL, 3) + "\x80")),
                    Catch::Contains("cut short"));
  // The payload length lies.
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(99, 1, 3'600'000'000LL, 3) + "\x02")),
                    Catch::Contains("payload length"));
  // A zlib bomb: 64 MB of zeros inflates past the limit for the default bucket count, and is
  // never held whole.
  const std::string bomb =
      frame(inner_header(0, 1, 3'600'000'000LL, 3) + std::string(64 << 20, '\0'));
  CHECK_THROWS_WITH(decode_compressed(bomb), Catch::Contains("inflates past"));
  CHECK_THROWS_WITH(decode_compressed_base64("not base64!"), Catch::Contains("not base64"));
  // Two counts of 2^62 each: a total past 2^63 would overflow.
  const std::string huge = std::string(9, '\x80');  // zigzag(2^62) = 2^63: the ninth byte's top bit
  CHECK_THROWS_WITH(decode_compressed(frame(inner_header(18, 1, 3'600'000'000LL, 3) + huge + huge)),
                    Catch::Contains("add up past 2^63"));
}

TEST_CASE("histogram log: merged tags are bounded, and a line that is not one names where") {
  const std::string histogram = encode_compressed_base64(sample());
  std::string log =
      "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
  for (int tag = 0; tag < 257; ++tag)
    log += "Tag=t" + std::to_string(tag) + ",0.000,1.000,1.000," + histogram + "\n";
  std::istringstream many(log);
  MergedLogs merged;
  CHECK_THROWS_WITH(merge_histogram_log(many, "many.hlog", merged),
                    Catch::Contains("many.hlog:258: more than 256 tags"));
  std::istringstream bad("\"StartTimestamp\",\"x\"\n1.0,2.0\n");
  MergedLogs other;
  CHECK_THROWS_WITH(merge_histogram_log(bad, "bad.hlog", other),
                    Catch::Contains("bad.hlog:2: fewer than 4 fields"));
}
