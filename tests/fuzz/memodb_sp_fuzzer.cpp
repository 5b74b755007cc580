// SPDX-License-Identifier: Apache-2.0
// The SP codec under memo01 (polybus/memodb/sp.hpp), as a stream from a peer. Input layout:
// fuzz_util.hpp's [control][splits][payload]; flag bit 0 picks IPC framing, bit 1 a small
// message limit (64 bytes, else 64 KiB). The payload's first 8 bytes are the peer's connection
// header, the rest the stream, fed whole and then in chunks.
// Checks: feed() never takes more than offered, takes nothing while a message waits, and makes
// progress otherwise; no message is over the limit; an error is sp_bad_frame or
// sp_message_too_large and sticks; the messages framed again decode to themselves; the
// decoding is the same however the stream is cut; split_request()'s backtrace is whole words
// ending at the first with the top bit, followed by the body, and split_reply() gives the first
// word's ID back; check_connection_header() accepts exactly the SP header of its peer.
#include "fuzz_util.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/memodb/sp.hpp"

using namespace polybus::memodb;

namespace {

struct Outcome {
  std::vector<std::string> messages;
  std::error_code ec;
};

Outcome decode(const std::vector<std::string_view>& parts, sp::Carrier carrier, std::size_t limit) {
  Outcome out;
  sp::FrameDecoder decoder(carrier, limit);
  for (auto part : parts) {
    while (!part.empty()) {
      std::error_code ec;
      std::string why;
      const bool waiting = decoder.ready();
      const std::size_t used = decoder.feed(part, ec, &why);
      FUZZ_CHECK(used <= part.size());
      if (waiting) FUZZ_CHECK(used == 0);
      if (ec) {
        FUZZ_CHECK(ec == make_error_code(errc::sp_bad_frame) ||
                   ec == make_error_code(errc::sp_message_too_large));
        FUZZ_CHECK(!why.empty());
        std::error_code again;
        decoder.feed("x", again);
        FUZZ_CHECK(again);
        out.ec = ec;
        return out;
      }
      part.remove_prefix(used);
      if (decoder.ready()) {
        std::string message = decoder.take();
        FUZZ_CHECK(message.size() <= limit);
        FUZZ_CHECK(!decoder.ready());
        out.messages.push_back(std::move(message));
      } else {
        FUZZ_CHECK(used > 0 || part.empty());
      }
    }
  }
  return out;
}

void check_ids(std::string_view message) {
  std::string_view backtrace, body;
  bool too_many = false;
  if (!sp::split_request(message, backtrace, body, too_many) && !too_many) {
    FUZZ_CHECK(backtrace.size() % 4 == 0 && backtrace.size() >= 4);
    FUZZ_CHECK(backtrace.size() <= 4 * static_cast<std::size_t>(sp::kMaxHops));
    FUZZ_CHECK(backtrace.data() == message.data());
    FUZZ_CHECK(backtrace.size() + body.size() == message.size());
    for (std::size_t i = 0; i < backtrace.size(); i += 4) {
      const bool top = (static_cast<unsigned char>(backtrace[i]) & 0x80u) != 0;
      FUZZ_CHECK(top == (i + 4 == backtrace.size()));
    }
  }
  std::string_view rest;
  if (auto id = sp::split_reply(message, rest)) {
    FUZZ_CHECK((*id & 0x80000000u) != 0);
    FUZZ_CHECK(sp::encode_request_id(*id) == message.substr(0, 4));
    FUZZ_CHECK(rest.size() + 4 == message.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polybus::fuzz;
  const SplitInput in = split_input(data, size);
  const auto carrier = (in.flags & 1) ? sp::Carrier::ipc : sp::Carrier::tcp;
  const std::size_t limit = (in.flags & 2) ? 64 : 64 * 1024;
  std::string_view stream = in.payload;

  const std::string_view header = stream.substr(0, sp::kHeaderSize);
  for (auto peer : {sp::Protocol::req0, sp::Protocol::rep0}) {
    std::string why;
    const bool ok = !sp::check_connection_header(header, peer, &why);
    FUZZ_CHECK(ok == (header == sp::connection_header(peer)));
    FUZZ_CHECK(ok == why.empty());
  }
  stream.remove_prefix(header.size());

  const Outcome whole = decode({stream}, carrier, limit);
  const OwnedChunks owned(chunks(stream, in.sizes));
  const Outcome cut = decode(owned.views, carrier, limit);
  FUZZ_CHECK(whole.messages == cut.messages);
  FUZZ_CHECK(whole.ec == cut.ec);

  std::string framed;
  for (const auto& m : whole.messages) {
    check_ids(m);
    framed += sp::frame_prefix(carrier, m.size()) + m;
  }
  const Outcome again = decode({framed}, carrier, limit);
  FUZZ_CHECK(!again.ec && again.messages == whole.messages);
  return 0;
}
