// SPDX-License-Identifier: Apache-2.0
// Micro-benchmarks of the wire codecs' hot paths (Google Benchmark, Debian's libbenchmark-dev):
// decoding a stream of 200-byte messages and encoding a publish, per protocol. Items/s is
// messages per second on one core; the parsers hand out views, so no payload is copied.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "polybus/figg/codec.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"

namespace {

constexpr std::size_t kPayloadSize = 200;
constexpr int kMessagesPerStream = 1000;

const std::string& payload() {
  static const std::string bytes(kPayloadSize, 'x');
  return bytes;
}

void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

// nsqd's message frames: size, type 2, timestamp, attempts, 16-byte id, body.
std::string nsq_message_stream() {
  std::string stream;
  for (int i = 0; i < kMessagesPerStream; ++i) {
    put_be32(stream, static_cast<std::uint32_t>(polybus::nsq::kFrameTypeSize +
                                                polybus::nsq::kMessageHeaderSize + kPayloadSize));
    put_be32(stream, 2);
    stream.append(8, '\1');
    stream.append("\0\1", 2);
    stream.append("0123456789abcdef");
    stream.append(payload());
  }
  return stream;
}

void nsq_decode_messages(benchmark::State& state) {
  const std::string stream = nsq_message_stream();
  polybus::nsq::FrameParser parser;
  for (auto _ : state) {
    std::string_view input = stream;
    while (!input.empty()) {
      polybus::nsq::Frame frame;
      auto result = parser.feed(input, frame);
      if (result.error) state.SkipWithError("nsq frame error");
      input.remove_prefix(result.consumed);
      polybus::nsq::MessageView message;
      if (result.has_frame && !polybus::nsq::parse_message(frame.body, message))
        benchmark::DoNotOptimize(message.body.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * kMessagesPerStream);
}
BENCHMARK(nsq_decode_messages);

void nsq_encode_pub_header(benchmark::State& state) {
  std::string out;
  for (auto _ : state) {
    out.clear();
    (void)polybus::nsq::append_pub_header(out, "bench_topic", kPayloadSize);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(nsq_encode_pub_header);

std::string figg_data_stream() {
  std::string stream;
  for (int i = 0; i < kMessagesPerStream; ++i) {
    polybus::figg::append_data_header(stream, "bench_topic", static_cast<std::uint64_t>(i) * 204,
                                      kPayloadSize);
    stream.append(payload());
  }
  return stream;
}

void figg_decode_data(benchmark::State& state) {
  const std::string stream = figg_data_stream();
  polybus::figg::FrameParser parser(1 << 20);
  for (auto _ : state) {
    std::string_view input = stream;
    while (!input.empty()) {
      polybus::figg::Frame frame{};
      auto result = parser.feed(input, frame);
      if (result.error) state.SkipWithError("figg frame error");
      input.remove_prefix(result.consumed);
      polybus::figg::Data data;
      if (result.has_frame && !polybus::figg::parse_data(frame.payload, data))
        benchmark::DoNotOptimize(data.data.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * kMessagesPerStream);
}
BENCHMARK(figg_decode_data);

void memodb_encode_job(benchmark::State& state) {
  std::string out;
  for (auto _ : state) {
    out.clear();
    (void)polybus::memodb::append_job(out, {}, "echo", 5000);
    out.append(payload());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(memodb_encode_job);

void memodb_decode_result(benchmark::State& state) {
  std::string message;
  (void)polybus::memodb::append_result(message, {});
  message.append(payload());
  for (auto _ : state) {
    polybus::memodb::Header header;
    std::string_view body;
    if (polybus::memodb::decode(message, header, body)) state.SkipWithError("memodb decode error");
    benchmark::DoNotOptimize(body.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(memodb_decode_result);

std::string quickio_raw_stream() {
  const std::string json = polybus::text::json_quote(payload());
  std::string stream;
  for (int i = 0; i < kMessagesPerStream; ++i)
    polybus::quickio::append_raw_frame(stream,
                                       polybus::quickio::make_event("/bench/topic", 0, json));
  return stream;
}

// Framing, event parsing and JSON validation: what the client does per received event.
void quickio_decode_events(benchmark::State& state) {
  const std::string stream = quickio_raw_stream();
  polybus::quickio::RawFrameDecoder decoder(1 << 20);
  for (auto _ : state) {
    auto ec = decoder.feed(stream, [](std::string_view frame) {
      polybus::quickio::Event event;
      if (!polybus::quickio::parse_event(frame, event)) benchmark::DoNotOptimize(event.json.data());
    });
    if (ec) state.SkipWithError("quickio frame error");
  }
  state.SetItemsProcessed(state.iterations() * kMessagesPerStream);
}
BENCHMARK(quickio_decode_events);

void quickio_encode_event(benchmark::State& state) {
  const std::string json = polybus::text::json_quote(payload());
  std::string out;
  for (auto _ : state) {
    out.clear();
    polybus::quickio::append_event(out, "/bench/topic", 7, json);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(quickio_encode_event);

}  // namespace

BENCHMARK_MAIN();
