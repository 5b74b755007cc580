// SPDX-License-Identifier: Apache-2.0
// IDENTIFY as nsqd 1.3 handles it: decoding the client's JSON with the leniency and strictness of
// Go's encoding/json, applying each setting with nsqd's bounds and error texts, and writing the
// feature-negotiation response with nsqd's fields in nsqd's order.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "polybus/nsq_testing.hpp"

namespace polybus::nsq::testing::detail {

// What a client runs with; nsqd's defaults until IDENTIFY changes them.
struct ClientSettings {
  std::string client_id;
  std::string hostname;
  std::string user_agent;
  std::chrono::milliseconds heartbeat_interval{0};  // 0: no heartbeats, no read deadline
  std::chrono::milliseconds msg_timeout{0};
  std::int64_t output_buffer_size = 16 * 1024;
  std::chrono::milliseconds output_buffer_timeout{0};
  int sample_rate = 0;  // percent of messages kept; 0 keeps all

  static ClientSettings defaults(const NsqdOptions& options);
};

// The IDENTIFY body's fields; absent ones keep Go's zero values, which mean "the default".
struct IdentifyRequest {
  std::string client_id;
  std::string hostname;
  std::string user_agent;
  bool feature_negotiation = false;
  std::int64_t heartbeat_interval = 0;
  std::int64_t output_buffer_size = 0;
  std::int64_t output_buffer_timeout = 0;
  bool tls_v1 = false;
  bool snappy = false;
  bool deflate = false;
  std::int64_t deflate_level = 0;
  std::int64_t sample_rate = 0;
  std::int64_t msg_timeout = 0;
};

// False when Go's json.Unmarshal would fail: not JSON, a top level other than an object or null,
// or a known field of the wrong type (numbers must be integers that fit the Go field). Keys match
// case-insensitively and the last duplicate wins, as in Go.
bool parse_identify_request(std::string_view json, IdentifyRequest& out);

// Applies the request as nsqd's clientV2.Identify does. Returns "" or the first refusal, e.g.
// "heartbeat interval (500) is invalid" (nsqd sends it as E_BAD_BODY "IDENTIFY " + text).
std::string apply_identify(const IdentifyRequest& request, const NsqdOptions& options,
                           ClientSettings& settings);

struct Negotiated {
  bool tls_v1 = false;
  bool snappy = false;
  bool deflate = false;
  int deflate_level = 6;
};

// What nsqd agrees to: a feature both sides want and the server offers.
Negotiated negotiate(const IdentifyRequest& request, const NsqdOptions& options,
                     bool tls_available);

// The JSON response to an IDENTIFY with feature_negotiation, field for field as nsqd 1.3 writes it.
std::string identify_response(const NsqdOptions& options, const ClientSettings& settings,
                              const Negotiated& negotiated);

}  // namespace polybus::nsq::testing::detail
