// SPDX-License-Identifier: Apache-2.0
// The decoders of the in-process nsqd/nsqlookupd (nsq/testing/src, used by the tests, `polybus
// demo` and `polybus broker`), and their agreement with the client's codec. Input: byte 0 picks
// the target, then fuzz_util.hpp's [control][splits][payload]:
//   0  CommandParser on the payload, driven as ClientConnection drives it (a size after
//      IDENTIFY/AUTH/PUB/DPUB/MPUB, the body when the size is within bounds), whole and split
//   1  client commands made by the client's encoders from the payload, read back by
//      CommandParser: the same words and bodies; IDENTIFY's JSON read by parse_identify_request
//      gives the client's fields back
//   2  IDENTIFY: parse_identify_request, apply_identify, negotiate, identify_response, and the
//      client's parse_identify_response must accept that response; go_json_string/go_quote
//   3  core's http::RequestReader as the test nsqlookupd drives it, whole and split; query_value
//   4  LookupV1Session (nsqlookupd's TCP protocol): the payload whole and split give the same
//      answers and registrations; what it holds stays within its bounds
// Checks: as listed, plus consumed never exceeding the input and whole/split agreement.
#include <rapidjson/document.h>

#include "command_parser.hpp"
#include "fuzz_util.hpp"
#include "go_query.hpp"
#include "go_text.hpp"
#include "identify.hpp"
#include "lookup_registry.hpp"
#include "lookup_v1_session.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/text/http.hpp"

using namespace polybus::nsq;
using namespace polybus::nsq::testing::detail;
using polybus::fuzz::ByteReader;
using polybus::fuzz::OwnedChunks;

namespace {

constexpr std::size_t kMaxLine = 1024;
constexpr std::int32_t kMaxBody = 1 << 16;

bool has_body(std::string_view command) {
  return command == "IDENTIFY" || command == "AUTH" || command == "PUB" || command == "DPUB" ||
         command == "MPUB";
}

// What CommandParser reported, as text: one entry per line, size and body.
std::vector<std::string> read_commands(const std::vector<std::string_view>& parts,
                                       std::error_code* error = nullptr) {
  CommandParser parser(kMaxLine);
  std::vector<std::string> events;
  for (auto part : parts) {
    std::string_view in = part;
    while (!in.empty()) {
      auto r = parser.feed(in);
      FUZZ_CHECK(r.consumed <= in.size());
      if (r.error) {
        if (error) *error = r.error;
        return events;
      }
      FUZZ_CHECK(r.consumed > 0 || r.event != CommandParser::Event::need_more);
      in.remove_prefix(r.consumed);
      switch (r.event) {
        case CommandParser::Event::need_more:
          FUZZ_CHECK(in.empty());
          break;
        case CommandParser::Event::line: {
          std::string line = "line";
          for (auto word : parser.params()) line += "|" + std::string(word);
          events.push_back(line);
          FUZZ_CHECK(!parser.params().empty());
          if (has_body(parser.params()[0])) parser.expect_size();
          break;
        }
        case CommandParser::Event::body_size:
          events.push_back("size|" + std::to_string(parser.size()));
          if (parser.size() >= 0 && parser.size() <= kMaxBody)
            parser.expect_body(static_cast<std::size_t>(parser.size()));
          else
            return events;  // nsqd answers E_BAD_BODY and closes
          break;
        case CommandParser::Event::body:
          events.push_back("body|" + std::string(parser.body()));
          break;
      }
    }
  }
  return events;
}

std::string topic_from(ByteReader& in) {
  static const char* const kNames[] = {"t", "topic#ephemeral", "a.b_c-d"};
  std::uint8_t pick = in.u8();
  if (pick < 3) return kNames[pick];
  std::string name(in.bytes(pick % 70));
  return valid_topic_name(name) ? name : "fallback";
}

// Client commands, encoded, with the events CommandParser must report for them.
void encoders(ByteReader& in, const std::vector<std::size_t>& sizes) {
  std::string wire;
  std::vector<std::string> expected;
  std::vector<polybus::nsq::IdentifyRequest> identifies;
  auto with_body = [&](const std::string& line, std::string_view body) {
    expected.push_back(line);
    expected.push_back("size|" + std::to_string(body.size()));
    expected.push_back("body|" + std::string(body));
  };
  while (!in.empty()) {
    const std::uint8_t op = in.u8() % 9;
    const std::string topic = topic_from(in);
    std::string id;
    for (char c : in.bytes(16))
      id.push_back(static_cast<char>('!' + static_cast<unsigned char>(c) % 94));
    id.resize(16, 'x');
    switch (op) {
      case 0: {
        polybus::nsq::IdentifyRequest r;
        r.client_id = std::string(in.short_bytes());
        r.hostname = std::string(in.short_bytes());
        r.heartbeat_interval = static_cast<std::int32_t>(in.u32());
        r.snappy = in.flag();
        std::string json = r.to_json();
        FUZZ_CHECK(!append_identify(wire, json));
        with_body("line|IDENTIFY", json);
        identifies.push_back(r);
        break;
      }
      case 1: {
        std::string body(in.short_bytes());
        if (body.empty()) body = "b";
        FUZZ_CHECK(!append_pub(wire, topic, body));
        with_body("line|PUB|" + topic, body);
        break;
      }
      case 2: {
        std::string body(in.short_bytes());
        if (body.empty()) body = "b";
        std::uint32_t defer = in.u32();
        FUZZ_CHECK(!append_dpub(wire, topic, defer, body));
        with_body("line|DPUB|" + topic + "|" + std::to_string(defer), body);
        break;
      }
      case 3: {
        std::vector<std::string> bodies;
        for (std::uint8_t n = in.u8() % 4 + 1; n > 0; --n) bodies.emplace_back(in.short_bytes());
        for (auto& b : bodies)
          if (b.empty()) b = "b";
        std::string before = wire;
        FUZZ_CHECK(!append_mpub(wire, topic, bodies));
        std::string body = wire.substr(before.size() + 6 + topic.size() + 4);
        expected.push_back("line|MPUB|" + topic);
        expected.push_back("size|" + std::to_string(body.size()));
        expected.push_back("body|" + body);
        break;
      }
      case 4:
        FUZZ_CHECK(!append_sub(wire, topic, topic));
        expected.push_back("line|SUB|" + topic + "|" + topic);
        break;
      case 5: {
        std::uint32_t n = in.u32();
        append_rdy(wire, n);
        expected.push_back("line|RDY|" + std::to_string(n));
        break;
      }
      case 6: {
        std::uint32_t delay = in.u32();
        FUZZ_CHECK(!append_req(wire, id, delay));
        expected.push_back("line|REQ|" + id + "|" + std::to_string(delay));
        break;
      }
      case 7:
        FUZZ_CHECK(!append_fin(wire, id));
        FUZZ_CHECK(!append_touch(wire, id));
        expected.push_back("line|FIN|" + id);
        expected.push_back("line|TOUCH|" + id);
        break;
      default:
        append_nop(wire);
        append_cls(wire);
        expected.push_back("line|NOP");
        expected.push_back("line|CLS");
    }
  }
  OwnedChunks split(polybus::fuzz::chunks(wire, sizes));
  FUZZ_CHECK(read_commands(split.views) == expected);
  // The test nsqd reads the client's IDENTIFY as the client meant it.
  for (const auto& sent : identifies) {
    testing::detail::IdentifyRequest got;
    FUZZ_CHECK(parse_identify_request(sent.to_json(), got));
    FUZZ_CHECK(got.client_id == sent.client_id && got.hostname == sent.hostname);
    FUZZ_CHECK(got.heartbeat_interval == *sent.heartbeat_interval);
    FUZZ_CHECK(got.snappy == sent.snappy && got.feature_negotiation);
  }
}

void identify(std::string_view json) {
  testing::detail::IdentifyRequest request;
  if (parse_identify_request(json, request)) {
    polybus::nsq::testing::NsqdOptions options;
    ClientSettings settings = ClientSettings::defaults(options);
    if (apply_identify(request, options, settings).empty()) {
      Negotiated negotiated = negotiate(request, options, false);
      std::string response = identify_response(options, settings, negotiated);
      // The client understands what the test nsqd answers.
      IdentifyResponse parsed;
      FUZZ_CHECK(!parse_identify_response(response, parsed));
      FUZZ_CHECK(parsed.snappy == negotiated.snappy && parsed.deflate == negotiated.deflate);
    }
  }
  std::string quoted = go_json_string(json);
  rapidjson::Document doc;
  doc.Parse(quoted.data(), quoted.size());
  FUZZ_CHECK(!doc.HasParseError() && doc.IsString());
  if (polybus::fuzz::valid_utf8(json))
    FUZZ_CHECK(std::string_view(doc.GetString(), doc.GetStringLength()) == json);
  FUZZ_CHECK(polybus::fuzz::valid_utf8(go_quote(json)));
}

struct HttpOutcome {
  std::vector<std::string> requests;
  int error_status = 0;
};

HttpOutcome http(const std::vector<std::string_view>& parts) {
  using polybus::http::RequestReader;
  RequestReader reader(512, 4096);
  HttpOutcome o;
  for (auto part : parts) {
    std::string_view in = part;
    // As the test nsqlookupd: until the reader wants more bytes.
    for (int steps = 0;; ++steps) {
      FUZZ_CHECK(steps <= 3 * static_cast<int>(part.size()) + 3);  // no spin without progress
      auto r = reader.feed(in);
      FUZZ_CHECK(r.consumed <= in.size());
      in.remove_prefix(r.consumed);
      if (r.status == RequestReader::Status::need_more) {
        FUZZ_CHECK(in.empty());
        break;
      }
      if (r.status == RequestReader::Status::error) {
        FUZZ_CHECK(r.error_status == 400 || r.error_status == 413 || r.error_status == 431 ||
                   r.error_status == 501);
        o.error_status = r.error_status;
        return o;
      }
      const auto& q = reader.request();
      if (r.status == RequestReader::Status::head_ready) {
        FUZZ_CHECK(!q.method.empty() && reader.raw_head().size() <= 512);
        if (q.chunked) {
          o.error_status = 501;
          return o;
        }
        continue;
      }
      FUZZ_CHECK(q.body.size() == q.content_length.value_or(0) && q.body.size() <= 4096);
      o.requests.push_back(q.method + " " + q.path + " ? " + q.query +
                           (q.keep_alive() ? " k" : "") + " " + std::to_string(q.body.size()));
      bool valid = true;
      if (auto v = query_value(q.query, "topic", valid)) polybus::fuzz::touch(*v);
      reader.next();
    }
  }
  return o;
}

// The V1 session's answers, and what the registry then holds, fed in the given pieces.
std::string lookup_v1(const std::vector<std::string_view>& parts) {
  LookupRegistry registry;
  LookupV1Session session(registry, "127.0.0.1:5000", {"lookupd", "host", 4160, 4161});
  std::string answers;
  for (auto part : parts) {
    const std::size_t before = answers.size();
    session.feed(part, answers);
    // Each piece is answered by at most one answer per line it completes (and IDENTIFY's JSON).
    FUZZ_CHECK(answers.size() - before <= (part.size() + 1) * 40 + 512);
    if (session.ended()) break;
  }
  return answers + "|" + registry.nodes().json + "|" + registry.topics().json;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t target = data[0] % 5;
  auto input = polybus::fuzz::split_input(data + 1, size - 1);
  switch (target) {
    case 0: {
      OwnedChunks whole({input.payload});
      OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
      std::error_code a_error, b_error;
      auto a = read_commands(whole.views, &a_error);
      auto b = read_commands(split.views, &b_error);
      FUZZ_CHECK(a == b && a_error == b_error);
      break;
    }
    case 1: {
      ByteReader in(reinterpret_cast<const std::uint8_t*>(input.payload.data()),
                    input.payload.size());
      encoders(in, input.sizes);
      break;
    }
    case 2: {
      OwnedChunks whole({input.payload});
      identify(whole.views[0]);
      break;
    }
    case 4: {
      OwnedChunks whole({input.payload});
      OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
      FUZZ_CHECK(lookup_v1(whole.views) == lookup_v1(split.views));
      break;
    }
    default: {
      OwnedChunks whole({input.payload});
      OwnedChunks split(polybus::fuzz::chunks(input.payload, input.sizes));
      auto a = http(whole.views);
      auto b = http(split.views);
      FUZZ_CHECK(a.requests == b.requests && a.error_status == b.error_status);
    }
  }
  return 0;
}
