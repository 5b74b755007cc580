// SPDX-License-Identifier: Apache-2.0
// Stream compression as NSQ negotiates it in IDENTIFY, sans-IO: snappy's framing format
// ("snappy": true) and raw deflate ("deflate": true). Both the client adapter and the test nsqd use
// it; once a connection switches, every byte each way goes through one of these streams.
//
// Each direction is a separate object with its own state, fed whatever bytes are at hand:
//
//   SnappyFrameEncoder / DeflateEncoder   frames -> compressed bytes, flushed at every call, so the
//                                         peer can decode everything written so far
//   SnappyFrameDecoder / DeflateDecoder   compressed bytes in chunks of any size (one byte, half a
//                                         chunk, several chunks) -> the decoded bytes
//
// StreamCodec bundles one encoder and one decoder for a connection behind one interface, so that
// the I/O code does not care which compression was agreed:
//
//   std::unique_ptr<StreamCodec> codec = make_snappy_codec();   // or make_deflate_codec(6)
//   codec->encode(frames, wire_out);          // before writing
//   if (auto ec = codec->decode(wire_in, plain)) close_connection(ec);   // after reading
//
// Decoders never trust the peer: a chunk is rejected by its header before any of it is buffered,
// nothing is buffered beyond one snappy chunk (at most 4 + MaxCompressedLength(65536) bytes), and
// one decode() call appends at most `max_output_per_call` bytes (a deflate stream can expand about
// a thousandfold, so this bound is what stops a small input from exhausting memory). Errors are
// sticky: after one, the stream is out of sync and the connection must be closed.
#pragma once

#include "polybus/export.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace polybus::nsq {

// ---------------------------------------------------------------------------------------------
// Errors

enum class compression_errc {
  missing_stream_identifier = 1,  // a snappy stream that does not start with the identifier chunk
  bad_stream_identifier,          // an identifier chunk with the wrong length or magic
  reserved_chunk_type,            // unskippable snappy chunk type 0x02-0x7f
  chunk_too_short,                // snappy data chunk shorter than its 4-byte checksum
  chunk_too_large,                // snappy chunk length over the framing format's maximum
  corrupt_compressed_data,        // a snappy block that does not decompress
  uncompressed_too_large,         // a snappy chunk holding more than 65536 bytes
  checksum_mismatch,              // masked CRC-32C of the chunk data is wrong
  corrupt_deflate_data,           // inflate rejected the data
  data_after_end,                 // bytes after the final block of a deflate stream
  output_limit_exceeded,          // one decode() call would append more than its maximum
  zlib_failure,                   // zlib failed for a reason other than the data (memory)
};

POLYBUS_API const std::error_category& compression_category() noexcept;
POLYBUS_API std::error_code make_error_code(compression_errc e) noexcept;

// ---------------------------------------------------------------------------------------------
// Snappy framing format (https://github.com/google/snappy/blob/main/framing_format.txt)

// The stream identifier chunk: type 0xff, length 6, "sNaPpY". An encoder emits it once first.
inline constexpr std::string_view kSnappyStreamIdentifier{"\xff\x06\x00\x00sNaPpY", 10};
// Most uncompressed bytes one chunk may carry.
inline constexpr std::size_t kSnappyMaxChunkData = 65536;
// Default for max_output_per_call: generous for any real batch, small enough to survive a bomb.
inline constexpr std::size_t kDefaultMaxDecodedPerCall = 64 * 1024 * 1024;

// CRC-32C (Castagnoli), as snappy's framing format and iSCSI use it. Pass a previous result as
// `crc` to continue over more data. crc32c("123456789") == 0xe3069283.
POLYBUS_API std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0) noexcept;
// The checksum stored in a chunk: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
POLYBUS_API std::uint32_t masked_crc32c(std::string_view data) noexcept;

class POLYBUS_API SnappyFrameEncoder {
 public:
  // Appends `in` as framed chunks to `out`, preceded by the stream identifier on the first call
  // that has data. Each chunk carries at most 65536 bytes, compressed unless that saves less than
  // an eighth (then stored as an uncompressed chunk, as the Go encoder nsqd uses does).
  void encode(std::string_view in, std::string& out);

 private:
  bool started_ = false;
  std::string scratch_;
};

class POLYBUS_API SnappyFrameDecoder {
 public:
  explicit SnappyFrameDecoder(std::size_t max_output_per_call = kDefaultMaxDecodedPerCall);

  // Appends the data of every complete chunk in `in` to `out` and keeps a partial chunk for the
  // next call. Padding (0xfe) and skippable chunks (0x80-0xfd) are skipped without buffering.
  // On error, `out` may hold the data of the valid chunks before the bad one.
  std::error_code decode(std::string_view in, std::string& out);

  // True between chunks: no partial chunk is held, so end of stream here is clean.
  bool idle() const noexcept { return header_filled_ == 0 && skip_remaining_ == 0 && !error_; }

 private:
  std::error_code start_chunk();
  std::error_code finish_chunk(std::string_view body, std::string& out, std::size_t out_start);
  std::error_code fail(std::error_code error);

  std::size_t max_output_per_call_;
  unsigned char header_[4] = {};
  std::size_t header_filled_ = 0;
  std::uint8_t chunk_type_ = 0;
  std::size_t chunk_length_ = 0;
  std::size_t skip_remaining_ = 0;
  std::string body_;  // a data chunk split across calls
  bool seen_identifier_ = false;
  std::error_code error_;
};

// ---------------------------------------------------------------------------------------------
// Raw deflate (RFC 1951, zlib windowBits -15), as Go's compress/flate that nsqd uses

class POLYBUS_API DeflateEncoder {
 public:
  // `level` 1 (fastest) to 9 (smallest); values outside are clamped into that range, as nsqd
  // clamps the level a client asks for. Throws std::bad_alloc when zlib cannot allocate.
  explicit DeflateEncoder(int level);
  ~DeflateEncoder();
  DeflateEncoder(const DeflateEncoder&) = delete;
  DeflateEncoder& operator=(const DeflateEncoder&) = delete;

  // Compresses `in` into `out` and ends with a sync flush (an empty stored block), so the peer can
  // inflate everything so far. An empty `in` appends nothing. Errors: zlib_failure.
  std::error_code encode(std::string_view in, std::string& out);

  int level() const noexcept { return level_; }

 private:
  struct Stream;
  std::unique_ptr<Stream> stream_;
  int level_;
  std::error_code error_;
};

class POLYBUS_API DeflateDecoder {
 public:
  explicit DeflateDecoder(std::size_t max_output_per_call = kDefaultMaxDecodedPerCall);
  ~DeflateDecoder();
  DeflateDecoder(const DeflateDecoder&) = delete;
  DeflateDecoder& operator=(const DeflateDecoder&) = delete;

  // Inflates `in` onto `out`; input split anywhere is fine. Errors: corrupt_deflate_data,
  // output_limit_exceeded (more than max_output_per_call bytes from this call), data_after_end
  // (bytes after a final block: NSQ streams never end), zlib_failure.
  std::error_code decode(std::string_view in, std::string& out);

 private:
  std::error_code fail(std::error_code error);

  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::size_t max_output_per_call_;
  bool ended_ = false;
  std::error_code error_;
};

// ---------------------------------------------------------------------------------------------
// One connection's compression, both directions

class POLYBUS_API StreamCodec {
 public:
  virtual ~StreamCodec() = default;
  // Appends the compressed form of `in` to `out`, flushed (see the encoders above).
  virtual std::error_code encode(std::string_view in, std::string& out) = 0;
  // Appends what `in` decodes to, keeping partial input for the next call (see the decoders).
  virtual std::error_code decode(std::string_view in, std::string& out) = 0;
  // "snappy" or "deflate", for logs.
  virtual std::string_view name() const noexcept = 0;
};

POLYBUS_API std::unique_ptr<StreamCodec> make_snappy_codec(
    std::size_t max_output_per_call = kDefaultMaxDecodedPerCall);
// Compresses at `level` (clamped to 1-9); decoding does not depend on the peer's level.
POLYBUS_API std::unique_ptr<StreamCodec> make_deflate_codec(
    int level, std::size_t max_output_per_call = kDefaultMaxDecodedPerCall);

}  // namespace polybus::nsq

template <>
struct std::is_error_code_enum<polybus::nsq::compression_errc> : std::true_type {};
