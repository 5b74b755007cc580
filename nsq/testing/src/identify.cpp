// SPDX-License-Identifier: Apache-2.0
#include "identify.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

namespace polybus::nsq::testing::detail {
namespace {

constexpr std::int64_t kMinOutputBufferTimeoutMs = 25;     // nsqd's --min-output-buffer-timeout
constexpr std::int64_t kMaxOutputBufferTimeoutMs = 30000;  // nsqd's --max-output-buffer-timeout
constexpr std::int64_t kMinOutputBufferSize = 64;
constexpr std::int64_t kMinClientMsgTimeoutMs = 1000;
constexpr std::int64_t kMinHeartbeatIntervalMs = 1000;
constexpr int kDefaultDeflateLevel = 6;

bool key_is(const rapidjson::Value& key, const char* name) {
  const std::size_t length = std::strlen(name);
  if (key.GetStringLength() != length) return false;
  const char* text = key.GetString();
  for (std::size_t i = 0; i < length; ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != name[i]) return false;
  }
  return true;
}

// Each reader leaves `out` alone for null (Go's json does) and fails on a wrong type.
bool read(const rapidjson::Value& value, std::string& out) {
  if (value.IsNull()) return true;
  if (!value.IsString()) return false;
  out.assign(value.GetString(), value.GetStringLength());
  return true;
}

bool read(const rapidjson::Value& value, bool& out) {
  if (value.IsNull()) return true;
  if (!value.IsBool()) return false;
  out = value.GetBool();
  return true;
}

bool read(const rapidjson::Value& value, std::int64_t& out, std::int64_t min, std::int64_t max) {
  if (value.IsNull()) return true;
  if (!value.IsInt64()) return false;  // fractions, exponents and overflow fail in Go too
  const std::int64_t number = value.GetInt64();
  if (number < min || number > max) return false;
  out = number;
  return true;
}

bool read_int(const rapidjson::Value& value, std::int64_t& out) {
  return read(value, out, std::numeric_limits<std::int64_t>::min(),
              std::numeric_limits<std::int64_t>::max());
}

bool read_int32(const rapidjson::Value& value, std::int64_t& out) {
  return read(value, out, std::numeric_limits<std::int32_t>::min(),
              std::numeric_limits<std::int32_t>::max());
}

bool read_member(const rapidjson::Value& key, const rapidjson::Value& value, IdentifyRequest& out) {
  if (key_is(key, "client_id")) return read(value, out.client_id);
  if (key_is(key, "hostname")) return read(value, out.hostname);
  if (key_is(key, "user_agent")) return read(value, out.user_agent);
  if (key_is(key, "feature_negotiation")) return read(value, out.feature_negotiation);
  if (key_is(key, "heartbeat_interval")) return read_int(value, out.heartbeat_interval);
  if (key_is(key, "output_buffer_size")) return read_int(value, out.output_buffer_size);
  if (key_is(key, "output_buffer_timeout")) return read_int(value, out.output_buffer_timeout);
  if (key_is(key, "tls_v1")) return read(value, out.tls_v1);
  if (key_is(key, "snappy")) return read(value, out.snappy);
  if (key_is(key, "deflate")) return read(value, out.deflate);
  if (key_is(key, "deflate_level")) return read_int(value, out.deflate_level);
  if (key_is(key, "sample_rate")) return read_int32(value, out.sample_rate);
  if (key_is(key, "msg_timeout")) return read_int(value, out.msg_timeout);
  return true;  // unknown fields are ignored
}

const char* json_bool(bool value) {
  return value ? "true" : "false";
}

}  // namespace

ClientSettings ClientSettings::defaults(const NsqdOptions& options) {
  ClientSettings settings;
  settings.heartbeat_interval = options.heartbeat_interval;
  settings.msg_timeout = options.msg_timeout;
  settings.output_buffer_timeout = options.output_buffer_timeout;
  return settings;
}

bool parse_identify_request(std::string_view json, IdentifyRequest& out) {
  rapidjson::Document document;
  // Iterative: a hostile body of deeply nested arrays must not exhaust the stack.
  document.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (document.HasParseError()) return false;
  if (document.IsNull()) return true;
  if (!document.IsObject()) return false;
  IdentifyRequest request;
  bool ok = true;
  for (auto member = document.MemberBegin(); member != document.MemberEnd(); ++member) {
    ok = read_member(member->name, member->value, request) && ok;
  }
  if (!ok) return false;
  out = std::move(request);
  return true;
}

std::string apply_identify(const IdentifyRequest& request, const NsqdOptions& options,
                           ClientSettings& settings) {
  settings.client_id = request.client_id;
  settings.hostname = request.hostname;
  settings.user_agent = request.user_agent;

  const std::int64_t heartbeat = request.heartbeat_interval;
  if (heartbeat == -1) {
    settings.heartbeat_interval = std::chrono::milliseconds(0);
  } else if (heartbeat != 0) {
    if (heartbeat < kMinHeartbeatIntervalMs || heartbeat > options.max_heartbeat_interval.count()) {
      return "heartbeat interval (" + std::to_string(heartbeat) + ") is invalid";
    }
    settings.heartbeat_interval = std::chrono::milliseconds(heartbeat);
  }

  const std::int64_t timeout = request.output_buffer_timeout;
  if (timeout == -1) {
    settings.output_buffer_timeout = std::chrono::milliseconds(0);
  } else if (timeout != 0) {
    if (timeout < kMinOutputBufferTimeoutMs || timeout > kMaxOutputBufferTimeoutMs) {
      return "output buffer timeout (" + std::to_string(timeout) + ") is invalid";
    }
    settings.output_buffer_timeout = std::chrono::milliseconds(timeout);
  }
  const std::int64_t size = request.output_buffer_size;
  if (size == -1) {
    settings.output_buffer_size = 1;
    settings.output_buffer_timeout = std::chrono::milliseconds(0);
  } else if (size != 0) {
    if (size < kMinOutputBufferSize || size > options.max_output_buffer_size) {
      return "output buffer size (" + std::to_string(size) + ") is invalid";
    }
    settings.output_buffer_size = size;
  }

  if (request.sample_rate < 0 || request.sample_rate > 99) {
    return "sample rate (" + std::to_string(request.sample_rate) + ") is invalid";
  }
  settings.sample_rate = static_cast<int>(request.sample_rate);

  const std::int64_t msg_timeout = request.msg_timeout;
  if (msg_timeout != 0) {
    if (msg_timeout < kMinClientMsgTimeoutMs || msg_timeout > options.max_msg_timeout.count()) {
      return "msg timeout (" + std::to_string(msg_timeout) + ") is invalid";
    }
    settings.msg_timeout = std::chrono::milliseconds(msg_timeout);
  }
  return {};
}

Negotiated negotiate(const IdentifyRequest& request, const NsqdOptions& options,
                     bool tls_available) {
  Negotiated negotiated;
  negotiated.tls_v1 = tls_available && request.tls_v1;
  negotiated.deflate = options.deflate && request.deflate;
  std::int64_t level = kDefaultDeflateLevel;
  if (negotiated.deflate && request.deflate_level > 0) level = request.deflate_level;
  level = std::min<std::int64_t>(level, options.max_deflate_level);
  negotiated.deflate_level = static_cast<int>(level);
  negotiated.snappy = options.snappy && request.snappy;
  return negotiated;
}

std::string identify_response(const NsqdOptions& options, const ClientSettings& settings,
                              const Negotiated& negotiated) {
  std::string json = "{\"max_rdy_count\":" + std::to_string(options.max_rdy_count);
  json += ",\"version\":\"1.3.0\"";
  json += ",\"max_msg_timeout\":" + std::to_string(options.max_msg_timeout.count());
  json += ",\"msg_timeout\":" + std::to_string(settings.msg_timeout.count());
  json += ",\"tls_v1\":" + std::string(json_bool(negotiated.tls_v1));
  json += ",\"deflate\":" + std::string(json_bool(negotiated.deflate));
  json += ",\"deflate_level\":" + std::to_string(negotiated.deflate_level);
  json += ",\"max_deflate_level\":" + std::to_string(options.max_deflate_level);
  json += ",\"snappy\":" + std::string(json_bool(negotiated.snappy));
  json += ",\"sample_rate\":" + std::to_string(settings.sample_rate);
  json += ",\"auth_required\":" + std::string(json_bool(!options.auth_secret.empty()));
  json += ",\"output_buffer_size\":" + std::to_string(settings.output_buffer_size);
  json += ",\"output_buffer_timeout\":" + std::to_string(settings.output_buffer_timeout.count());
  json += "}";
  return json;
}

}  // namespace polybus::nsq::testing::detail
