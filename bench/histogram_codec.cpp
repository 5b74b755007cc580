// SPDX-License-Identifier: Apache-2.0
#include "histogram_codec.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "polybus/text/big_endian.hpp"
#include "polybus/text/text.hpp"

namespace polybus::bench {
namespace {

constexpr std::uint32_t kEncodingCookie = 0x1c849303 | 0x10;  // 0x10: LEB128 counts
constexpr std::uint32_t kCompressedCookie = 0x1c849304 | 0x10;
constexpr std::uint32_t kCookieBaseMask = ~0xf0u;  // readers ignore the word-size nibble
constexpr std::size_t kHeaderSize = 40;

void append_zigzag(std::string& out, std::int64_t value) {
  auto v = (static_cast<std::uint64_t>(value) << 1) ^ static_cast<std::uint64_t>(value >> 63);
  // Eight groups of 7 bits, then the ninth byte whole: HdrHistogram's ZigZagEncoding.
  for (int i = 0; i < 8; ++i) {
    if (v < 0x80) {
      out.push_back(static_cast<char>(v));
      return;
    }
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool read_zigzag(std::string_view in, std::size_t& at, std::int64_t& value) {
  std::uint64_t v = 0;
  for (int i = 0; i < 9; ++i) {
    if (at >= in.size()) return false;
    const auto byte = static_cast<unsigned char>(in[at++]);
    if (i == 8) {
      v |= static_cast<std::uint64_t>(byte) << 56;
      break;
    }
    v |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) break;
  }
  value = static_cast<std::int64_t>((v >> 1) ^ (~(v & 1) + 1));
  return true;
}

[[noreturn]] void refuse(const std::string& what) {
  throw std::runtime_error("histogram encoding: " + what);
}

}  // namespace

std::string encode_compressed(const HdrHistogram& h) {
  std::string counts;
  const std::int32_t end = h.max_index() + 1;
  for (std::int32_t i = 0; i < end;) {
    const std::int64_t count = h.count_at_index(i);
    if (count != 0) {
      append_zigzag(counts, count);
      ++i;
      continue;
    }
    std::int64_t zeros = 0;
    while (i < end && h.count_at_index(i) == 0) ++zeros, ++i;
    append_zigzag(counts, zeros == 1 ? 0 : -zeros);
  }
  std::string inner;
  inner.reserve(kHeaderSize + counts.size());
  append_big_endian<4>(inner, kEncodingCookie);
  append_big_endian<4>(inner, counts.size());
  append_big_endian<4>(inner, 0);  // normalizing index offset
  append_big_endian<4>(inner, static_cast<std::uint64_t>(h.significant_digits()));
  append_big_endian<8>(inner, static_cast<std::uint64_t>(h.lowest()));
  append_big_endian<8>(inner, static_cast<std::uint64_t>(h.highest()));
  double ratio = 1.0;
  std::uint64_t ratio_bits;
  std::memcpy(&ratio_bits, &ratio, sizeof ratio);
  append_big_endian<8>(inner, ratio_bits);
  inner += counts;

  uLongf packed_size = compressBound(static_cast<uLong>(inner.size()));
  std::string out(8 + packed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data() + 8), &packed_size,
                reinterpret_cast<const Bytef*>(inner.data()), static_cast<uLong>(inner.size()),
                Z_DEFAULT_COMPRESSION) != Z_OK)
    refuse("zlib could not compress");
  store_big_endian<4>(out.data(), kCompressedCookie);
  store_big_endian<4>(out.data() + 4, packed_size);
  out.resize(8 + packed_size);
  return out;
}

std::string encode_compressed_base64(const HdrHistogram& histogram) {
  std::string out;
  text::append_base64(out, encode_compressed(histogram));
  return out;
}

HdrHistogram decode_compressed(std::string_view bytes, std::int32_t max_counts) {
  if (bytes.size() < 8) refuse(std::to_string(bytes.size()) + " bytes, shorter than its header");
  const auto cookie = static_cast<std::uint32_t>(read_big_endian<4>(bytes.data()));
  if ((cookie & kCookieBaseMask) != (kCompressedCookie & kCookieBaseMask))
    refuse("cookie " + std::to_string(cookie) + " is not a V2 compressed histogram's");
  const auto packed = read_big_endian<4>(bytes.data() + 4);
  if (packed != bytes.size() - 8)
    refuse("says " + std::to_string(packed) + " compressed bytes follow, " +
           std::to_string(bytes.size() - 8) + " do");
  // The largest honest inner encoding: the header and 9 bytes per bucket.
  const std::size_t limit = kHeaderSize + 9 * static_cast<std::size_t>(max_counts);
  // Inflated in growing steps up to the limit: a small histogram costs a small buffer.
  std::string inner;
  z_stream z{};
  if (inflateInit(&z) != Z_OK) refuse("zlib could not start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + 8));
  z.avail_in = static_cast<uInt>(packed);
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.total_out == inner.size()) {
      if (inner.size() >= limit) break;
      inner.resize(std::min(limit, std::max<std::size_t>(4096, inner.size() * 2)));
    }
    z.next_out = reinterpret_cast<Bytef*>(inner.data() + z.total_out);
    z.avail_out = static_cast<uInt>(inner.size() - z.total_out);
    rc = inflate(&z, Z_NO_FLUSH);
  }
  const std::size_t inflated = z.total_out;
  inflateEnd(&z);
  if (rc == Z_OK)
    refuse("inflates past " + std::to_string(limit) + " bytes (the limit for " +
           std::to_string(max_counts) + " buckets)");
  if (rc != Z_STREAM_END)
    refuse("zlib data is corrupt or truncated (inflate " + std::to_string(rc) + ")");
  inner.resize(inflated);
  if (inner.size() < kHeaderSize) refuse("inner encoding shorter than its header");
  const auto inner_cookie = static_cast<std::uint32_t>(read_big_endian<4>(inner.data()));
  if ((inner_cookie & kCookieBaseMask) != (kEncodingCookie & kCookieBaseMask))
    refuse("inner cookie " + std::to_string(inner_cookie) + " is not a V2 histogram's");
  const auto payload = read_big_endian<4>(inner.data() + 4);
  const auto offset = static_cast<std::int32_t>(read_big_endian<4>(inner.data() + 8));
  const auto digits = static_cast<std::int32_t>(read_big_endian<4>(inner.data() + 12));
  const auto lowest = static_cast<std::int64_t>(read_big_endian<8>(inner.data() + 16));
  const auto highest = static_cast<std::int64_t>(read_big_endian<8>(inner.data() + 24));
  if (payload != inner.size() - kHeaderSize)
    refuse("payload length " + std::to_string(payload) + ", " +
           std::to_string(inner.size() - kHeaderSize) + " bytes follow");
  if (offset != 0)
    refuse("normalizing index offset " + std::to_string(offset) + " (only 0 is read)");
  if (lowest < 1 || highest < 2 * lowest || highest > (INT64_C(1) << 62) || digits < 1 ||
      digits > 5)
    refuse("lowest " + std::to_string(lowest) + ", highest " + std::to_string(highest) +
           ", digits " + std::to_string(digits) + " out of range");
  // The layout's size, before allocating it: the same sub-bucket arithmetic, without the array.
  {
    std::int64_t single_unit = 2;
    for (int i = 0; i < digits; ++i) single_unit *= 10;
    int half_magnitude = 0;
    while ((std::int64_t{2} << half_magnitude) < single_unit) ++half_magnitude;
    const int unit = 63 - __builtin_clzll(static_cast<unsigned long long>(lowest));
    std::int64_t untrackable = (std::int64_t{1} << (half_magnitude + 1)) << unit;
    std::int64_t buckets = 1;
    while (untrackable <= highest && untrackable <= INT64_MAX / 2) untrackable <<= 1, ++buckets;
    if ((buckets + 1) * (std::int64_t{1} << half_magnitude) > max_counts)
      refuse("lowest " + std::to_string(lowest) + " to highest " + std::to_string(highest) +
             " at " + std::to_string(digits) + " digits needs more than " +
             std::to_string(max_counts) + " buckets");
  }
  HdrHistogram h(lowest, highest, digits);
  std::string_view counts(inner.data() + kHeaderSize, inner.size() - kHeaderSize);
  std::size_t at = 0;
  std::int32_t index = 0;
  while (at < counts.size()) {
    std::int64_t value = 0;
    if (!read_zigzag(counts, at, value))
      refuse("a count is cut short at byte " + std::to_string(at));
    if (value < 0) {
      if (-value > h.counts_length() - index)
        refuse("a run of " + std::to_string(-value) + " empty buckets passes the last (" +
               std::to_string(h.counts_length()) + ")");
      index += static_cast<std::int32_t>(-value);
      continue;
    }
    if (index >= h.counts_length())
      refuse("more counts than the " + std::to_string(h.counts_length()) + " buckets");
    if (value > INT64_MAX - h.total_count())
      refuse("the counts add up past 2^63 at bucket " + std::to_string(index));
    h.set_count_at_index(index++, value);
  }
  return h;
}

HdrHistogram decode_compressed_base64(std::string_view base64, std::int32_t max_counts) {
  std::string bytes;
  std::size_t bad_at = 0;
  if (!text::base64_decode(base64, bytes, bad_at))
    refuse("not base64 at character " + std::to_string(bad_at));
  return decode_compressed(bytes, max_counts);
}

}  // namespace polybus::bench
