// SPDX-License-Identifier: Apache-2.0
// The JSON bodies of the NSQ codec: parse_identify_response, parse_auth_response and
// parse_lookup_response (nsqlookupd's /lookup) on the whole input, and IdentifyRequest::to_json
// with the input as its strings. Checks: outputs are untouched on error; what the documentation
// promises of a success holds (no negative limits, producers with an address and a tcp_port,
// strings of valid UTF-8);
// to_json is JSON that gives the strings back.
#include <rapidjson/document.h>

#include <limits>

#include "fuzz_util.hpp"
#include "polybus/nsq/codec.hpp"

using namespace polybus::nsq;

namespace {

bool same(const IdentifyResponse& a, const IdentifyResponse& b) {
  return a.negotiated == b.negotiated && a.max_rdy_count == b.max_rdy_count &&
         a.version == b.version && a.max_msg_timeout == b.max_msg_timeout &&
         a.msg_timeout == b.msg_timeout && a.tls_v1 == b.tls_v1 && a.deflate == b.deflate &&
         a.deflate_level == b.deflate_level && a.max_deflate_level == b.max_deflate_level &&
         a.snappy == b.snappy && a.sample_rate == b.sample_rate &&
         a.auth_required == b.auth_required && a.output_buffer_size == b.output_buffer_size &&
         a.output_buffer_timeout == b.output_buffer_timeout &&
         a.topology_region == b.topology_region && a.topology_zone == b.topology_zone;
}

// Known finding 1: a lone low-surrogate escape gives a string that is not UTF-8.
void check_utf8(const std::string& s) {
  if (polybus::fuzz::known_findings() || !polybus::fuzz::has_encoded_surrogate(s))
    FUZZ_CHECK(polybus::fuzz::valid_utf8(s));
}

IdentifyResponse sentinel_identify() {
  IdentifyResponse r;
  r.max_rdy_count = -7;
  r.version = "sentinel";
  r.topology_zone = "zone";
  return r;
}

void identify(std::string_view body) {
  IdentifyResponse out = sentinel_identify();
  if (auto ec = parse_identify_response(body, out)) {
    FUZZ_CHECK(same(out, sentinel_identify()));
    return;
  }
  FUZZ_CHECK(out.negotiated == (body != kOkBody));
  // "UTF-8 is validated so that strings handed on (host names, versions) are well-formed."
  check_utf8(out.version);
  check_utf8(out.topology_region);
  check_utf8(out.topology_zone);
  FUZZ_CHECK(out.max_rdy_count >= 0);
  FUZZ_CHECK(out.msg_timeout >= 0);
  FUZZ_CHECK(out.max_msg_timeout >= 0);
}

void auth(std::string_view body) {
  AuthResponse out;
  out.identity = "sentinel";
  out.permission_count = -3;
  if (parse_auth_response(body, out)) {
    FUZZ_CHECK(out.identity == "sentinel" && out.permission_count == -3 &&
               out.identity_url.empty());
    return;
  }
  FUZZ_CHECK(out.permission_count >= 0);
  check_utf8(out.identity);
  check_utf8(out.identity_url);
}

void lookup(std::string_view body) {
  std::vector<LookupProducer> out(1);
  out[0].hostname = "sentinel";
  if (parse_lookup_response(body, out)) {
    FUZZ_CHECK(out.size() == 1 && out[0].hostname == "sentinel");
    return;
  }
  for (const auto& p : out) {
    FUZZ_CHECK(!p.broadcast_address.empty());
    FUZZ_CHECK(p.tcp_port >= 1);
    check_utf8(p.broadcast_address);
    check_utf8(p.hostname);
  }
}

// The input's bytes as every string of an IDENTIFY request; the JSON must give them back.
void identify_request(std::string_view bytes) {
  IdentifyRequest request;
  request.client_id = std::string(bytes);
  request.hostname = std::string(bytes.substr(bytes.size() / 2));
  request.user_agent = std::string(bytes.substr(0, bytes.size() / 3));
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < bytes.size() && i < 8; ++i)
    n = n << 8 | static_cast<unsigned char>(bytes[i]);
  request.heartbeat_interval = static_cast<std::int64_t>(n);
  request.deflate = (n & 1) != 0;
  request.deflate_level = static_cast<int>(n % 11);
  std::string json = request.to_json();
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());  // no encoding validation: nsqd's Go JSON takes any bytes
  FUZZ_CHECK(!doc.HasParseError());
  FUZZ_CHECK(doc.IsObject());
  auto text = [&doc](const char* key) {
    auto it = doc.FindMember(key);
    if (it == doc.MemberEnd()) return std::string();
    FUZZ_CHECK(it->value.IsString());
    return std::string(it->value.GetString(), it->value.GetStringLength());
  };
  FUZZ_CHECK(text("client_id") == request.client_id);
  FUZZ_CHECK(text("hostname") == request.hostname);
  FUZZ_CHECK(text("user_agent") == request.user_agent);
  FUZZ_CHECK(doc["feature_negotiation"].IsBool());
  FUZZ_CHECK(doc["heartbeat_interval"].IsInt64() &&
             doc["heartbeat_interval"].GetInt64() == *request.heartbeat_interval);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy in its own allocation of exactly the input's size.
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  std::string_view body(copy.get(), size);
  identify(body);
  auth(body);
  lookup(body);
  identify_request(body);
  return 0;
}
