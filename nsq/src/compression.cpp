// SPDX-License-Identifier: Apache-2.0
#include "polybus/nsq/compression.hpp"

#include "polybus/error.hpp"

#include <snappy.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <new>
#include <stdexcept>

namespace polybus::nsq {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors

class CompressionCategory final : public std::error_category {
 public:
  std::error_condition default_error_condition(int) const noexcept override {
    return make_error_condition(polybus::errc::protocol_error);  // a corrupt stream from nsqd
  }
  const char* name() const noexcept override { return "nsq.compression"; }

  std::string message(int value) const override {
    switch (static_cast<compression_errc>(value)) {
      case compression_errc::missing_stream_identifier:
        return "snappy stream does not start with the stream identifier chunk";
      case compression_errc::bad_stream_identifier:
        return "snappy stream identifier chunk has the wrong length or magic";
      case compression_errc::reserved_chunk_type:
        return "reserved unskippable snappy chunk type (0x02-0x7f)";
      case compression_errc::chunk_too_short:
        return "snappy data chunk is shorter than its 4-byte checksum";
      case compression_errc::chunk_too_large:
        return "snappy chunk length is over the framing format's maximum";
      case compression_errc::corrupt_compressed_data:
        return "snappy chunk does not decompress";
      case compression_errc::uncompressed_too_large:
        return "snappy chunk holds more than 65536 uncompressed bytes";
      case compression_errc::checksum_mismatch:
        return "snappy chunk checksum (masked CRC-32C) does not match its data";
      case compression_errc::corrupt_deflate_data:
        return "deflate data is corrupt";
      case compression_errc::data_after_end:
        return "bytes after the final block of the deflate stream";
      case compression_errc::output_limit_exceeded:
        return "decompressed data is over the limit for one read";
      case compression_errc::zlib_failure:
        return "zlib failed (out of memory or internal error)";
    }
    return "unknown compression error";
  }
};

// ---------------------------------------------------------------------------------------------
// CRC-32C, reflected polynomial 0x82f63b78, one table lookup per byte: small and fast enough for
// chunks of at most 64 KiB.

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
    table[i] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kCrc32cTable = make_crc32c_table();

// ---------------------------------------------------------------------------------------------
// Snappy framing constants

constexpr std::uint8_t kChunkCompressed = 0x00;
constexpr std::uint8_t kChunkUncompressed = 0x01;
constexpr std::uint8_t kChunkStreamIdentifier = 0xff;
constexpr std::size_t kChecksumSize = 4;
constexpr std::string_view kStreamMagic = "sNaPpY";

std::uint32_t read_le32(const char* bytes) noexcept {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[0])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[3])) << 24;
}

void append_le(std::string& out, std::uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The largest chunk of each data type a conforming encoder can produce.
std::size_t max_compressed_chunk_length() {
  static const std::size_t length =
      kChecksumSize + snappy::MaxCompressedLength(kSnappyMaxChunkData);
  return length;
}
constexpr std::size_t kMaxUncompressedChunkLength = kChecksumSize + kSnappyMaxChunkData;

// zlib counts in uInt; feed larger inputs in pieces of this size.
constexpr std::size_t kZlibMaxPiece = std::size_t{1} << 30;
// Output is grown by at most this much per inflate call.
constexpr std::size_t kInflateStep = std::size_t{1} << 20;

class SnappyCodec final : public StreamCodec {
 public:
  explicit SnappyCodec(std::size_t max_output_per_call) : decoder_(max_output_per_call) {}
  std::error_code encode(std::string_view in, std::string& out) override {
    encoder_.encode(in, out);
    return {};
  }
  std::error_code decode(std::string_view in, std::string& out) override {
    return decoder_.decode(in, out);
  }
  std::string_view name() const noexcept override { return "snappy"; }

 private:
  SnappyFrameEncoder encoder_;
  SnappyFrameDecoder decoder_;
};

class DeflateCodec final : public StreamCodec {
 public:
  DeflateCodec(int level, std::size_t max_output_per_call)
      : encoder_(level), decoder_(max_output_per_call) {}
  std::error_code encode(std::string_view in, std::string& out) override {
    return encoder_.encode(in, out);
  }
  std::error_code decode(std::string_view in, std::string& out) override {
    return decoder_.decode(in, out);
  }
  std::string_view name() const noexcept override { return "deflate"; }

 private:
  DeflateEncoder encoder_;
  DeflateDecoder decoder_;
};

}  // namespace

const std::error_category& compression_category() noexcept {
  static const CompressionCategory category;
  return category;
}

std::error_code make_error_code(compression_errc e) noexcept {
  return {static_cast<int>(e), compression_category()};
}

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) noexcept {
  crc = ~crc;
  for (const char c : data) {
    crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  }
  return ~crc;
}

std::uint32_t masked_crc32c(std::string_view data) noexcept {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---------------------------------------------------------------------------------------------
// Snappy encoder

void SnappyFrameEncoder::encode(std::string_view in, std::string& out) {
  if (in.empty()) return;
  if (!started_) {
    out.append(kSnappyStreamIdentifier);
    started_ = true;
  }
  scratch_.resize(snappy::MaxCompressedLength(kSnappyMaxChunkData));
  while (!in.empty()) {
    const std::string_view piece = in.substr(0, kSnappyMaxChunkData);
    in.remove_prefix(piece.size());
    std::size_t compressed_length = 0;
    snappy::RawCompress(piece.data(), piece.size(), scratch_.data(), &compressed_length);
    // Incompressible data is stored as is rather than grown.
    const bool worth_it = compressed_length < piece.size() - piece.size() / 8;
    const std::string_view data =
        worth_it ? std::string_view(scratch_.data(), compressed_length) : piece;
    out.push_back(static_cast<char>(worth_it ? kChunkCompressed : kChunkUncompressed));
    append_le(out, static_cast<std::uint32_t>(kChecksumSize + data.size()), 3);
    append_le(out, masked_crc32c(piece), 4);
    out.append(data);
  }
}

// ---------------------------------------------------------------------------------------------
// Snappy decoder

SnappyFrameDecoder::SnappyFrameDecoder(std::size_t max_output_per_call)
    : max_output_per_call_(max_output_per_call) {}

std::error_code SnappyFrameDecoder::fail(std::error_code error) {
  error_ = error;
  body_.clear();
  body_.shrink_to_fit();
  return error;
}

// Judges a chunk by its 4-byte header alone, before a byte of its body is buffered.
std::error_code SnappyFrameDecoder::start_chunk() {
  chunk_type_ = header_[0];
  chunk_length_ = static_cast<std::size_t>(header_[1]) | static_cast<std::size_t>(header_[2]) << 8 |
                  static_cast<std::size_t>(header_[3]) << 16;
  if (!seen_identifier_ && chunk_type_ != kChunkStreamIdentifier) {
    return compression_errc::missing_stream_identifier;
  }
  switch (chunk_type_) {
    case kChunkStreamIdentifier:
      if (chunk_length_ != kStreamMagic.size()) return compression_errc::bad_stream_identifier;
      return {};
    case kChunkCompressed:
      if (chunk_length_ < kChecksumSize) return compression_errc::chunk_too_short;
      if (chunk_length_ > max_compressed_chunk_length()) return compression_errc::chunk_too_large;
      return {};
    case kChunkUncompressed:
      if (chunk_length_ < kChecksumSize) return compression_errc::chunk_too_short;
      if (chunk_length_ > kMaxUncompressedChunkLength) return compression_errc::chunk_too_large;
      return {};
    default:
      if (chunk_type_ < 0x80) return compression_errc::reserved_chunk_type;
      // Padding (0xfe) and skippable chunks: their bodies are skipped as they pass, never buffered.
      skip_remaining_ = chunk_length_;
      return {};
  }
}

std::error_code SnappyFrameDecoder::finish_chunk(std::string_view body, std::string& out,
                                                 std::size_t out_start) {
  if (chunk_type_ == kChunkStreamIdentifier) {
    if (body != kStreamMagic) return compression_errc::bad_stream_identifier;
    seen_identifier_ = true;
    return {};
  }
  const std::uint32_t expected_crc = read_le32(body.data());
  const std::string_view data = body.substr(kChecksumSize);
  const std::size_t produced = out.size() - out_start;
  const std::size_t old_size = out.size();
  if (chunk_type_ == kChunkCompressed) {
    std::size_t length = 0;
    if (!snappy::GetUncompressedLength(data.data(), data.size(), &length)) {
      return compression_errc::corrupt_compressed_data;
    }
    if (length > kSnappyMaxChunkData) return compression_errc::uncompressed_too_large;
    if (produced + length > max_output_per_call_) return compression_errc::output_limit_exceeded;
    out.resize(old_size + length);
    if (!snappy::RawUncompress(data.data(), data.size(), out.data() + old_size)) {
      out.resize(old_size);
      return compression_errc::corrupt_compressed_data;
    }
  } else {
    if (produced + data.size() > max_output_per_call_) {
      return compression_errc::output_limit_exceeded;
    }
    out.append(data);
  }
  if (masked_crc32c(std::string_view(out).substr(old_size)) != expected_crc) {
    out.resize(old_size);
    return compression_errc::checksum_mismatch;
  }
  return {};
}

std::error_code SnappyFrameDecoder::decode(std::string_view in, std::string& out) {
  if (error_) return error_;
  const std::size_t out_start = out.size();
  while (!in.empty()) {
    if (skip_remaining_ > 0) {
      const std::size_t n = std::min(skip_remaining_, in.size());
      in.remove_prefix(n);
      skip_remaining_ -= n;
      continue;
    }
    if (header_filled_ < sizeof header_) {
      const std::size_t n = std::min(sizeof header_ - header_filled_, in.size());
      std::copy_n(in.data(), n, reinterpret_cast<char*>(header_) + header_filled_);
      header_filled_ += n;
      in.remove_prefix(n);
      if (header_filled_ < sizeof header_) break;
      if (auto ec = start_chunk()) return fail(ec);
      if (chunk_type_ >= 0x80 && chunk_type_ != kChunkStreamIdentifier) {
        header_filled_ = 0;  // skippable: skip_remaining_ takes over
        continue;
      }
    }
    // Collecting a data or identifier chunk. A body wholly in `in` is used in place.
    if (body_.empty() && in.size() >= chunk_length_) {
      const std::string_view body = in.substr(0, chunk_length_);
      in.remove_prefix(chunk_length_);
      header_filled_ = 0;
      if (auto ec = finish_chunk(body, out, out_start)) return fail(ec);
      continue;
    }
    const std::size_t n = std::min(chunk_length_ - body_.size(), in.size());
    if (body_.empty()) body_.reserve(chunk_length_);
    body_.append(in.data(), n);
    in.remove_prefix(n);
    if (body_.size() == chunk_length_) {
      header_filled_ = 0;
      const std::error_code ec = finish_chunk(body_, out, out_start);
      body_.clear();
      if (ec) return fail(ec);
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Deflate

struct DeflateEncoder::Stream {
  z_stream z{};
};

DeflateEncoder::DeflateEncoder(int level)
    : stream_(std::make_unique<Stream>()), level_(std::clamp(level, 1, 9)) {
  const int rc = deflateInit2(&stream_->z, level_, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  if (rc == Z_MEM_ERROR) throw std::bad_alloc();
  if (rc != Z_OK) throw std::runtime_error("deflateInit2 failed");
}

DeflateEncoder::~DeflateEncoder() {
  deflateEnd(&stream_->z);
}

std::error_code DeflateEncoder::encode(std::string_view in, std::string& out) {
  if (error_) return error_;
  if (in.empty()) return {};
  z_stream& z = stream_->z;
  while (true) {
    const std::size_t piece = std::min(in.size(), kZlibMaxPiece);
    const bool last = piece == in.size();
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(piece);
    in.remove_prefix(piece);
    // Until deflate leaves output space unused, it has more to give.
    do {
      const std::size_t room =
          std::min(std::max<std::size_t>(deflateBound(&z, z.avail_in) + 16, 4096), kZlibMaxPiece);
      const std::size_t old_size = out.size();
      out.resize(old_size + room);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + old_size);
      z.avail_out = static_cast<uInt>(room);
      const int rc = deflate(&z, last ? Z_SYNC_FLUSH : Z_NO_FLUSH);
      out.resize(old_size + (room - z.avail_out));
      if (rc == Z_STREAM_ERROR) return error_ = compression_errc::zlib_failure;
    } while (z.avail_out == 0);
    if (last) return {};
  }
}

struct DeflateDecoder::Stream {
  z_stream z{};
};

DeflateDecoder::DeflateDecoder(std::size_t max_output_per_call)
    : stream_(std::make_unique<Stream>()), max_output_per_call_(max_output_per_call) {
  const int rc = inflateInit2(&stream_->z, -15);
  if (rc == Z_MEM_ERROR) throw std::bad_alloc();
  if (rc != Z_OK) throw std::runtime_error("inflateInit2 failed");
}

DeflateDecoder::~DeflateDecoder() {
  inflateEnd(&stream_->z);
}

std::error_code DeflateDecoder::decode(std::string_view in, std::string& out) {
  if (error_) return error_;
  if (in.empty()) return {};
  if (ended_) return error_ = compression_errc::data_after_end;
  z_stream& z = stream_->z;
  const std::size_t out_start = out.size();
  std::size_t produced = 0;
  while (true) {
    if (z.avail_in == 0 && !in.empty()) {
      const std::size_t piece = std::min(in.size(), kZlibMaxPiece);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
      z.avail_in = static_cast<uInt>(piece);
      in.remove_prefix(piece);
    }
    // Room for one byte beyond the limit: producing it proves the limit is passed, without
    // inflating any further.
    const std::size_t allowance = max_output_per_call_ - produced + 1;
    const std::size_t room = std::min(
        {allowance, std::max<std::size_t>(std::size_t{z.avail_in} * 4, 16384), kInflateStep});
    const std::size_t old_size = out.size();
    out.resize(old_size + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + old_size);
    z.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&z, Z_SYNC_FLUSH);
    const std::size_t got = room - z.avail_out;
    out.resize(old_size + got);
    produced += got;
    if (produced > max_output_per_call_) {
      out.resize(out_start + max_output_per_call_);
      return fail(compression_errc::output_limit_exceeded);
    }
    if (rc == Z_STREAM_END) {
      ended_ = true;
      if (z.avail_in > 0 || !in.empty()) return fail(compression_errc::data_after_end);
      break;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT)
      return fail(compression_errc::corrupt_deflate_data);
    // Z_BUF_ERROR only says no progress was possible: the input ran out mid-block.
    if (rc != Z_OK && rc != Z_BUF_ERROR) return fail(compression_errc::zlib_failure);
    // Output space left over with no input left: inflate has nothing more to give.
    if (z.avail_out > 0 && z.avail_in == 0 && in.empty()) break;
  }
  // zlib keeps no pointer into `in` past this call.
  z.next_in = nullptr;
  z.avail_in = 0;
  return {};
}

std::error_code DeflateDecoder::fail(std::error_code error) {
  error_ = error;
  stream_->z.next_in = nullptr;
  stream_->z.avail_in = 0;
  return error;
}

// ---------------------------------------------------------------------------------------------
// Codecs

std::unique_ptr<StreamCodec> make_snappy_codec(std::size_t max_output_per_call) {
  return std::make_unique<SnappyCodec>(max_output_per_call);
}

std::unique_ptr<StreamCodec> make_deflate_codec(int level, std::size_t max_output_per_call) {
  return std::make_unique<DeflateCodec>(level, max_output_per_call);
}

}  // namespace polybus::nsq
