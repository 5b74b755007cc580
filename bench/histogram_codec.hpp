// SPDX-License-Identifier: Apache-2.0
// HdrHistogram's "V2 compressed" encoding of a histogram, as its Java, C and Python libraries
// write and read it: a 4-byte cookie (0x1c849314), the length of what follows, and the zlib
// deflate of the V2 encoding (cookie 0x1c849313, payload length, normalizing index offset, digits,
// lowest, highest, the integer-to-double ratio, then the counts as ZigZag LEB128 varints, a
// negative one standing for that many empty buckets). All integers big-endian.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hdr_histogram.hpp"

namespace polybus::bench {

std::string encode_compressed(const HdrHistogram& histogram);
// The base64 of encode_compressed, as a histogram log line carries it.
std::string encode_compressed_base64(const HdrHistogram& histogram);

// Decodes what encode_compressed (or another HdrHistogram library) wrote. Input from elsewhere
// is bounded: a histogram of more than `max_counts` buckets (8 MB of counts by default) or a
// count run past the end is refused. Throws std::runtime_error naming what was wrong.
HdrHistogram decode_compressed(std::string_view bytes, std::int32_t max_counts = 1 << 20);
HdrHistogram decode_compressed_base64(std::string_view text, std::int32_t max_counts = 1 << 20);

}  // namespace polybus::bench
