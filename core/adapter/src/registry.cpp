// SPDX-License-Identifier: Apache-2.0
// The scheme registry (polybus/adapter/registry.hpp, polybus/schemes.hpp) and the options every
// scheme has. Adapters register here; connect() looks the scheme up.
#include "polybus/adapter/registry.hpp"

#include <map>
#include <mutex>

namespace polybus {

namespace {

struct Registry {
  std::mutex mutex;
  // Shared and immutable: a registration that replaces one leaves a connect() in progress with
  // the entry it found.
  std::map<std::string, std::shared_ptr<const SchemeInfo>> schemes;
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: adapters may register from
                                             // static initialisers
  return *instance;
}

}  // namespace

void register_scheme(SchemeInfo info) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = info.scheme;
  r.schemes[name] = std::make_shared<const SchemeInfo>(std::move(info));
}

std::shared_ptr<const SchemeInfo> find_scheme(const std::string& scheme) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.schemes.find(scheme);
  return it == r.schemes.end() ? nullptr : it->second;
}

std::optional<SchemeDescription> describe_scheme(const std::string& scheme) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.schemes.find(scheme);
  if (it == r.schemes.end()) return std::nullopt;
  return static_cast<const SchemeDescription&>(*it->second);
}

std::vector<std::string> registered_schemes() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, info] : r.schemes) names.push_back(name);
  return names;
}

OptionTable core_option_table() {
  constexpr std::int64_t hour = 3'600'000;
  OptionTable table({
      {"op_timeout", OptionType::duration, "10s", 1, 24 * hour,
       "default deadline of publish, request, ping and unsubscribe"},
      {"close_timeout", OptionType::duration, "5s", 0, hour,
       "deadline of the close that destroying the last Client handle performs"},
      {"connect_timeout", OptionType::duration, "5s", 1, hour,
       "deadline of one connection attempt"},
      {"write_timeout", OptionType::duration, "10s", 0, hour,
       "a write that makes no progress for this long drops the connection (0: never)"},
      {"read_timeout", OptionType::duration, "0", 0, 24 * hour,
       "silence for this long drops the connection (0: the protocol's heartbeat rule)"},
      {"reconnect_backoff",
       OptionType::choice,
       "exponential_jitter",
       0,
       0,
       "delay policy between connection attempts (exponential_jitter: doubling, +-20%)",
       {"exponential", "full_jitter", "exponential_jitter"}},
      {"reconnect_initial", OptionType::duration, "100ms", 0, hour, "first reconnect delay"},
      {"reconnect_max", OptionType::duration, "30s", 0, 24 * hour, "cap on the reconnect delay"},
      {"max_frame_size", OptionType::integer, "16777216", 1024, 1 << 30,
       "largest frame or message accepted from the wire, in bytes"},
      {"max_write_buffer", OptionType::integer, "67108864", 65536, std::int64_t{1} << 40,
       "bytes a connection may queue for writing; more closes it (limit_exceeded)"},
      {"max_decoded_per_read", OptionType::integer, "33554432", 65536, std::int64_t{1} << 40,
       "decompressed bytes one read may produce (a decompression bomb is an error)"},
      {"frame_timeout", OptionType::duration, "30s", 1, 24 * hour,
       "a frame whose first bytes arrived must complete within this (a drip is an error)"},
      {"max_held_messages", OptionType::integer, "10000", 1, 100'000'000,
       "messages a subscription holds for its handlers before it stops taking more"},
      {"max_held_bytes", OptionType::integer, "67108864", 1024, std::int64_t{1} << 40,
       "payload bytes a subscription holds for its handlers before it stops taking more"},
      {"max_outgoing_bytes", OptionType::integer, "1073741824", 1024, std::int64_t{1} << 40,
       "payload bytes of publishes and requests not completed yet; past it a new one is "
       "refused at once (limit_exceeded)"},
      {"max_json_depth", OptionType::integer, "64", 1, 10000,
       "nesting depth of any JSON read from or written to the wire"},
      {"max_redirects", OptionType::integer, "10", 0, 10000,
       "server-ordered moves in a row before they are refused (each one backs off)"},
      {"max_in_flight", OptionType::integer, "32", 0, 1'000'000,
       "messages a subscription may hold unacknowledged (SubscribeOptions can override)"},
      {"handler_concurrency", OptionType::integer, "1", 1, 256,
       "handlers a subscription runs at once (1: in arrival order)"},
      {"handler_thread",
       OptionType::choice,
       "pool",
       0,
       0,
       "where handlers run: pool (threads of their own) or io (the client's io thread, one at a "
       "time: no hand-off per message, but a handler that blocks stalls the whole client)",
       {"pool", "io"}},
      {"max_attempts", OptionType::integer, "0", 0, 65535,
       "deliveries after which a message is discarded (0: no limit)"},
      {"requeue_delay", OptionType::duration, "1s", 0, hour,
       "nack delay per attempt when the handler throws (grows with attempts)"},
      {"max_requeue_delay", OptionType::duration, "60s", 0, hour, "cap on the default nack delay"},
      {"envelope",
       OptionType::choice,
       "none",
       0,
       0,
       "what wraps each payload: none (raw, as other clients send it) or cloudevents "
       "(CloudEvents 1.0 structured JSON, which carries headers)",
       {"none", "cloudevents"}},
      {"envelope_source", OptionType::string, "/polybus", 0, 0,
       "the CloudEvents source attribute of what this client sends (a header can set it)"},
      {"envelope_type", OptionType::string, "polybus.message", 0, 0,
       "the CloudEvents type attribute of what this client sends (a header can set it)"},
      {"tls", OptionType::boolean, "false", 0, 0, "use TLS"},
      {"tls_verify", OptionType::boolean, "true", 0, 0, "verify the server certificate"},
      {"tls_ca_file", OptionType::string, "", 0, 0, "CA bundle (PEM); empty: the system's"},
      {"tls_cert_file", OptionType::string, "", 0, 0, "client certificate (PEM)"},
      {"tls_key_file", OptionType::string, "", 0, 0, "client private key (PEM)"},
      {"tls_server_name", OptionType::string, "", 0, 0, "SNI and verified name; empty: the host"},
  });
  using Kind = OptionRule::Kind;
  table.add_rule({Kind::not_above, "reconnect_initial", "reconnect_max",
                  "the first reconnect delay is capped by reconnect_max"});
  table.add_rule({Kind::not_above, "requeue_delay", "max_requeue_delay",
                  "the nack delay is capped by max_requeue_delay"});
  table.add_rule({Kind::both_or_neither, "tls_cert_file", "tls_key_file",
                  "a client certificate needs its private key"});
  return table;
}

}  // namespace polybus
