// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <snappy.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/nsq/compression.hpp"

using namespace polybus::nsq;
using namespace std::string_literals;

namespace {

// Mixed data: runs that compress well and random bytes that do not, so both snappy chunk types and
// several deflate block kinds appear.
std::string mixed_data(std::mt19937& rng, std::size_t size) {
  std::string data;
  data.reserve(size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> run(1, 3000);
  bool compressible = true;
  while (data.size() < size) {
    const std::size_t n = std::min(run(rng), size - data.size());
    if (compressible) {
      const std::string word = "polybus-" + std::to_string(byte(rng)) + " ";
      for (std::size_t i = 0; i < n; ++i) data.push_back(word[i % word.size()]);
    } else {
      for (std::size_t i = 0; i < n; ++i) data.push_back(static_cast<char>(byte(rng)));
    }
    compressible = !compressible;
  }
  return data;
}

// Cuts `bytes` at random points: many 1-byte pieces, some medium, some large.
std::vector<std::string> random_split(std::mt19937& rng, std::string_view bytes) {
  std::vector<std::string> pieces;
  std::uniform_int_distribution<int> kind(0, 2);
  while (!bytes.empty()) {
    std::size_t n = 1;
    switch (kind(rng)) {
      case 0:
        n = 1;
        break;
      case 1:
        n = std::uniform_int_distribution<std::size_t>(1, 100)(rng);
        break;
      default:
        n = std::uniform_int_distribution<std::size_t>(1, 100000)(rng);
        break;
    }
    n = std::min(n, bytes.size());
    pieces.emplace_back(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return pieces;
}

std::string le(std::uint32_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

// A snappy chunk built by hand, independently of the encoder.
std::string chunk(std::uint8_t type, std::string_view body) {
  return std::string(1, static_cast<char>(type)) + le(static_cast<std::uint32_t>(body.size()), 3) +
         std::string(body);
}

std::string uncompressed_chunk(std::string_view data) {
  return chunk(0x01, le(masked_crc32c(data), 4) + std::string(data));
}

std::string compressed_chunk(std::string_view data) {
  std::string compressed;
  snappy::Compress(data.data(), data.size(), &compressed);
  return chunk(0x00, le(masked_crc32c(data), 4) + compressed);
}

const std::string kIdentifier(kSnappyStreamIdentifier);

std::error_code decode_snappy(std::string_view stream, std::string& out) {
  SnappyFrameDecoder decoder;
  return decoder.decode(stream, out);
}

// A raw deflate stream that ends with a final block, as zlib writes it with Z_FINISH.
std::string deflate_finished(std::string_view data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CRC-32C

TEST_CASE("crc32c matches the published check values", "[compression][crc32c]") {
  CHECK(crc32c("123456789") == 0xe3069283u);
  CHECK(crc32c("") == 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  CHECK(crc32c(std::string(32, '\0')) == 0x8a9136aau);
  CHECK(crc32c(std::string(32, '\xff')) == 0x62a8ab43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc32c(ascending) == 0x46dd794eu);
}

TEST_CASE("crc32c continues over data given in pieces", "[compression][crc32c]") {
  CHECK(crc32c("56789", crc32c("1234")) == 0xe3069283u);
}

TEST_CASE("the masked checksum rotates right by 15 and adds the snappy constant",
          "[compression][crc32c]") {
  const std::uint32_t crc = 0xe3069283u;
  CHECK(masked_crc32c("123456789") == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

// ---------------------------------------------------------------------------------------------
// Snappy framing: encoder

TEST_CASE("the snappy stream starts with the stream identifier, once", "[compression][snappy]") {
  CHECK(kSnappyStreamIdentifier == "\xff\x06\x00\x00\x73\x4e\x61\x50\x70\x59"s);
  SnappyFrameEncoder encoder;
  std::string out;
  encoder.encode("", out);
  CHECK(out.empty());  // nothing to say yet
  encoder.encode("first", out);
  REQUIRE(out.size() > kIdentifier.size());
  CHECK(out.substr(0, kIdentifier.size()) == kIdentifier);
  std::string second;
  encoder.encode("second", second);
  CHECK(second.find("sNaPpY") == std::string::npos);
  CHECK(second[0] == '\x01');  // straight to a data chunk
}

TEST_CASE("short or incompressible data goes in an uncompressed chunk with its masked CRC",
          "[compression][snappy]") {
  SnappyFrameEncoder encoder;
  std::string out;
  encoder.encode("hello", out);
  CHECK(out == kIdentifier + uncompressed_chunk("hello"));
}

TEST_CASE("compressible data goes in compressed chunks of at most 65536 bytes",
          "[compression][snappy]") {
  SnappyFrameEncoder encoder;
  const std::string data(200000, 'a');
  std::string out;
  encoder.encode(data, out);
  std::string_view rest = std::string_view(out).substr(kIdentifier.size());
  std::size_t chunks = 0;
  std::size_t total = 0;
  while (!rest.empty()) {
    REQUIRE(rest.size() >= 4);
    CHECK(rest[0] == '\x00');
    const std::size_t length = static_cast<unsigned char>(rest[1]) |
                               static_cast<std::size_t>(static_cast<unsigned char>(rest[2])) << 8 |
                               static_cast<std::size_t>(static_cast<unsigned char>(rest[3])) << 16;
    const std::string_view compressed = rest.substr(8, length - 4);
    std::size_t uncompressed = 0;
    REQUIRE(snappy::GetUncompressedLength(compressed.data(), compressed.size(), &uncompressed));
    CHECK(uncompressed <= kSnappyMaxChunkData);
    total += uncompressed;
    ++chunks;
    rest.remove_prefix(4 + length);
  }
  CHECK(chunks == 4);
  CHECK(total == data.size());
}

// ---------------------------------------------------------------------------------------------
// Snappy framing: decoder

TEST_CASE("snappy round trips random data decoded in random splits", "[compression][snappy]") {
  std::mt19937 rng(20240611);
  for (int round = 0; round < 20; ++round) {
    SnappyFrameEncoder encoder;
    SnappyFrameDecoder decoder;
    std::string expected;
    std::string wire;
    // Several writes, as a connection makes them.
    const int writes = std::uniform_int_distribution<int>(1, 5)(rng);
    for (int w = 0; w < writes; ++w) {
      const std::string data =
          mixed_data(rng, std::uniform_int_distribution<std::size_t>(0, 150000)(rng));
      expected += data;
      encoder.encode(data, wire);
    }
    std::string decoded;
    for (const std::string& piece : random_split(rng, wire)) {
      REQUIRE_FALSE(decoder.decode(piece, decoded));
    }
    CHECK(decoder.idle());
    CHECK(decoded == expected);
  }
}

TEST_CASE("snappy decodes chunks built independently of the encoder", "[compression][snappy]") {
  const std::string stream = kIdentifier + compressed_chunk(std::string(1000, 'x')) +
                             uncompressed_chunk("plain") + kIdentifier +  // may repeat
                             compressed_chunk("tail");
  std::string out;
  REQUIRE_FALSE(decode_snappy(stream, out));
  CHECK(out == std::string(1000, 'x') + "plain" + "tail");
}

TEST_CASE("snappy skips padding and skippable chunks, even split and large",
          "[compression][snappy]") {
  const std::string stream = kIdentifier + chunk(0xfe, std::string(10, '\0')) +
                             uncompressed_chunk("a") + chunk(0x80, std::string(200000, 'z')) +
                             chunk(0xfd, "") + uncompressed_chunk("b");
  SnappyFrameDecoder decoder(1000);  // the skipped bytes do not count as output
  std::string out;
  for (const char c : stream) REQUIRE_FALSE(decoder.decode(std::string_view(&c, 1), out));
  CHECK(out == "ab");
  CHECK(decoder.idle());
}

TEST_CASE("a snappy stream must start with the stream identifier", "[compression][snappy]") {
  std::string out;
  CHECK(decode_snappy(uncompressed_chunk("x"), out) == compression_errc::missing_stream_identifier);
  CHECK(decode_snappy(chunk(0xfe, "") + kIdentifier, out) ==
        compression_errc::missing_stream_identifier);
  CHECK(decode_snappy(chunk(0xff, "sNaPpZ"), out) == compression_errc::bad_stream_identifier);
  CHECK(decode_snappy(chunk(0xff, "sNaPpYY"), out) == compression_errc::bad_stream_identifier);
  CHECK(out.empty());
}

TEST_CASE("snappy rejects a chunk whose checksum does not match", "[compression][snappy]") {
  std::string bad = uncompressed_chunk("payload");
  bad[4] ^= 1;
  std::string out;
  CHECK(decode_snappy(kIdentifier + bad, out) == compression_errc::checksum_mismatch);
  std::string bad_compressed = compressed_chunk(std::string(500, 'q'));
  bad_compressed[5] ^= 1;
  out.clear();
  CHECK(decode_snappy(kIdentifier + bad_compressed, out) == compression_errc::checksum_mismatch);
  CHECK(out.empty());  // the bad chunk's data is not handed out
}

TEST_CASE("snappy rejects reserved unskippable chunk types", "[compression][snappy]") {
  for (const int type : {0x02, 0x40, 0x7f}) {
    std::string out;
    CHECK(decode_snappy(kIdentifier + chunk(static_cast<std::uint8_t>(type), "data"), out) ==
          compression_errc::reserved_chunk_type);
  }
}

TEST_CASE("snappy rejects absurd chunk lengths from the header, before buffering",
          "[compression][snappy]") {
  SnappyFrameDecoder decoder;
  std::string out;
  // Only the 4-byte header of a 16 MiB compressed chunk: rejected without waiting for the body.
  CHECK(decoder.decode(kIdentifier + "\x00\xff\xff\xff"s, out) ==
        compression_errc::chunk_too_large);
  // Uncompressed chunks carry at most 65536 bytes.
  CHECK(decode_snappy(kIdentifier + uncompressed_chunk(std::string(65537, 'u')), out) ==
        compression_errc::chunk_too_large);
  CHECK_FALSE(decode_snappy(kIdentifier + uncompressed_chunk(std::string(65536, 'u')), out));
  // A data chunk too short to hold its checksum.
  CHECK(decode_snappy(kIdentifier + chunk(0x01, "abc"), out) == compression_errc::chunk_too_short);
  CHECK(decode_snappy(kIdentifier + chunk(0x00, ""), out) == compression_errc::chunk_too_short);
}

TEST_CASE("snappy rejects a compressed chunk that expands past 65536 bytes",
          "[compression][snappy]") {
  // Fits the chunk length limit, but its block claims 70000 bytes.
  std::string out;
  CHECK(decode_snappy(kIdentifier + compressed_chunk(std::string(70000, 'b')), out) ==
        compression_errc::uncompressed_too_large);
}

TEST_CASE("snappy rejects a compressed chunk that is not a snappy block", "[compression][snappy]") {
  // The length prefix is a varint that never ends.
  const std::string garbage = "\xff\xff\xff\xff\xff\xff garbage that is not snappy";
  std::string out;
  CHECK(decode_snappy(kIdentifier + chunk(0x00, le(masked_crc32c("x"), 4) + garbage), out) ==
        compression_errc::corrupt_compressed_data);
  // A valid length prefix followed by a copy that reaches before the start of the output.
  const std::string bad_copy = "\x0a\x05\x00"s;  // length 10, then a copy with offset 0
  CHECK(decode_snappy(kIdentifier + chunk(0x00, le(0, 4) + bad_copy), out) ==
        compression_errc::corrupt_compressed_data);
}

TEST_CASE("a truncated snappy stream is not idle and yields only complete chunks",
          "[compression][snappy]") {
  const std::string stream =
      kIdentifier + uncompressed_chunk("complete") + uncompressed_chunk("partial");
  SnappyFrameDecoder decoder;
  std::string out;
  REQUIRE_FALSE(decoder.decode(std::string_view(stream).substr(0, stream.size() - 3), out));
  CHECK(out == "complete");
  CHECK_FALSE(decoder.idle());
  REQUIRE_FALSE(decoder.decode(std::string_view(stream).substr(stream.size() - 3), out));
  CHECK(out == "completepartial");
  CHECK(decoder.idle());
}

TEST_CASE("snappy errors are sticky", "[compression][snappy]") {
  SnappyFrameDecoder decoder;
  std::string out;
  CHECK(decoder.decode(kIdentifier + chunk(0x02, ""), out) ==
        compression_errc::reserved_chunk_type);
  CHECK(decoder.decode(uncompressed_chunk("fine"), out) == compression_errc::reserved_chunk_type);
  CHECK(out.empty());
}

TEST_CASE("snappy bounds the output of one decode call", "[compression][snappy]") {
  SnappyFrameEncoder encoder;
  std::string wire;
  encoder.encode(std::string(200000, 'z'), wire);
  SnappyFrameDecoder limited(100000);
  std::string out;
  CHECK(limited.decode(wire, out) == compression_errc::output_limit_exceeded);
  CHECK(out.size() <= 100000);
  // The same stream in smaller reads stays within the bound each time.
  SnappyFrameDecoder per_read(100000);
  std::string all;
  for (std::size_t offset = 0; offset < wire.size(); offset += 1000) {
    REQUIRE_FALSE(per_read.decode(std::string_view(wire).substr(offset, 1000), all));
  }
  CHECK(all == std::string(200000, 'z'));
}

TEST_CASE("snappy survives random garbage without crashing", "[compression][snappy]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 200; ++round) {
    std::string garbage = kIdentifier;
    const std::size_t size = std::uniform_int_distribution<std::size_t>(0, 2000)(rng);
    for (std::size_t i = 0; i < size; ++i) garbage.push_back(static_cast<char>(byte(rng)));
    SnappyFrameDecoder decoder(1 << 20);
    std::string out;
    for (const std::string& piece : random_split(rng, garbage)) {
      if (decoder.decode(piece, out)) break;
    }
    CHECK(out.size() <= (1u << 20));
  }
}

// ---------------------------------------------------------------------------------------------
// Deflate

TEST_CASE("deflate round trips random data decoded in random splits, at every level",
          "[compression][deflate]") {
  std::mt19937 rng(424242);
  for (int level = 1; level <= 9; ++level) {
    DeflateEncoder encoder(level);
    DeflateDecoder decoder;
    std::string expected;
    std::string wire;
    for (int w = 0; w < 3; ++w) {
      const std::string data =
          mixed_data(rng, std::uniform_int_distribution<std::size_t>(0, 100000)(rng));
      expected += data;
      REQUIRE_FALSE(encoder.encode(data, wire));
    }
    std::string decoded;
    for (const std::string& piece : random_split(rng, wire)) {
      REQUIRE_FALSE(decoder.decode(piece, decoded));
    }
    CHECK(decoded == expected);
  }
}

TEST_CASE("each deflate write is flushed: the peer decodes it before the next one",
          "[compression][deflate]") {
  DeflateEncoder encoder(6);
  DeflateDecoder decoder;
  std::string decoded;
  for (const std::string message : {"first frame", "second frame", "third"}) {
    std::string wire;
    REQUIRE_FALSE(encoder.encode(message, wire));
    // A sync flush ends with an empty stored block.
    CHECK(wire.substr(wire.size() - 4) == "\x00\x00\xff\xff"s);
    decoded.clear();
    REQUIRE_FALSE(decoder.decode(wire, decoded));
    CHECK(decoded == message);
  }
  std::string nothing;
  REQUIRE_FALSE(encoder.encode("", nothing));
  CHECK(nothing.empty());
}

TEST_CASE("deflate levels are clamped to 1-9", "[compression][deflate]") {
  CHECK(DeflateEncoder(0).level() == 1);
  CHECK(DeflateEncoder(-5).level() == 1);
  CHECK(DeflateEncoder(6).level() == 6);
  CHECK(DeflateEncoder(12).level() == 9);
}

TEST_CASE("deflate rejects corrupt data", "[compression][deflate]") {
  DeflateDecoder decoder;
  std::string out;
  // First block header with the reserved block type 3.
  CHECK(decoder.decode("\x06garbage"s, out) == compression_errc::corrupt_deflate_data);
  CHECK(decoder.decode("more", out) == compression_errc::corrupt_deflate_data);  // sticky

  // A valid stream with a byte flipped in the middle of its data.
  DeflateEncoder encoder(6);
  std::mt19937 rng(99);
  std::string wire;
  REQUIRE_FALSE(encoder.encode(mixed_data(rng, 50000), wire));
  int rejected = 0;
  for (std::size_t at : {std::size_t{0}, wire.size() / 3, wire.size() / 2}) {
    std::string bad = wire;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    DeflateDecoder fresh;
    std::string decoded;
    if (fresh.decode(bad, decoded)) ++rejected;
    CHECK(decoded.size() <= 50000 + 65536);
  }
  CHECK(rejected >= 1);
}

TEST_CASE("deflate bounds the output of one decode call (a compression bomb)",
          "[compression][deflate]") {
  DeflateEncoder encoder(9);
  std::string wire;
  REQUIRE_FALSE(encoder.encode(std::string(20 * 1024 * 1024, '\0'), wire));
  CHECK(wire.size() < 100 * 1024);
  DeflateDecoder decoder(1024 * 1024);
  std::string out;
  CHECK(decoder.decode(wire, out) == compression_errc::output_limit_exceeded);
  CHECK(out.size() <= 1024 * 1024);
}

TEST_CASE("deflate reads a stream that zlib finished, and rejects bytes after its end",
          "[compression][deflate]") {
  const std::string finished = deflate_finished("the whole stream");
  DeflateDecoder decoder;
  std::string out;
  REQUIRE_FALSE(decoder.decode(finished, out));
  CHECK(out == "the whole stream");
  CHECK(decoder.decode("x", out) == compression_errc::data_after_end);

  DeflateDecoder same_call;
  std::string out2;
  CHECK(same_call.decode(finished + "trailing", out2) == compression_errc::data_after_end);
}

TEST_CASE("deflate survives random garbage without crashing", "[compression][deflate]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 200; ++round) {
    std::string garbage;
    const std::size_t size = std::uniform_int_distribution<std::size_t>(1, 2000)(rng);
    for (std::size_t i = 0; i < size; ++i) garbage.push_back(static_cast<char>(byte(rng)));
    DeflateDecoder decoder(1 << 20);
    std::string out;
    const std::vector<std::string> pieces = random_split(rng, garbage);
    for (const std::string& piece : pieces) {
      if (decoder.decode(piece, out)) break;
    }
    CHECK(out.size() <= pieces.size() * (1u << 20));
  }
}

// ---------------------------------------------------------------------------------------------
// StreamCodec

TEST_CASE("a codec pair talks to its peer in both directions", "[compression][codec]") {
  for (const bool use_snappy : {true, false}) {
    auto client = use_snappy ? make_snappy_codec() : make_deflate_codec(3);
    auto server = use_snappy ? make_snappy_codec() : make_deflate_codec(6);
    CHECK(client->name() == (use_snappy ? "snappy" : "deflate"));
    std::string wire, plain;
    REQUIRE_FALSE(client->encode("IDENTIFY-less ping", wire));
    REQUIRE_FALSE(server->decode(wire, plain));
    CHECK(plain == "IDENTIFY-less ping");
    wire.clear();
    plain.clear();
    REQUIRE_FALSE(server->encode("pong", wire));
    REQUIRE_FALSE(client->decode(wire, plain));
    CHECK(plain == "pong");
  }
}

TEST_CASE("compression errors have their own category and messages", "[compression]") {
  const std::error_code ec = compression_errc::checksum_mismatch;
  CHECK(ec.category().name() == std::string("nsq.compression"));
  CHECK(ec.message().find("checksum") != std::string::npos);
  CHECK(std::error_code(compression_errc::output_limit_exceeded) !=
        std::error_code(compression_errc::checksum_mismatch));
}
