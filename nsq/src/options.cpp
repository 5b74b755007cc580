// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

#include <unistd.h>

namespace polybus::nsq {
namespace {

std::string short_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "polybus";
  std::string host(name);
  return host.substr(0, host.find('.'));
}

}  // namespace

OptionTable option_table() {
  constexpr std::int64_t hour = 3'600'000;
  OptionTable table = core_option_table();
  // go-nsq's defaults where the core's differ.
  table.set_default("max_attempts", "5");
  table.set_default("requeue_delay", "90s");
  table.set_default("max_requeue_delay", "15m");
  table.set_default("reconnect_initial", "8s");
  table.set_default("reconnect_max", "2m");
  table.set_default("max_frame_size", std::to_string(kDefaultMaxFrameSize));
  table.add({
      {"client_id", OptionType::string, "", 0, 0, "IDENTIFY client_id (default: short hostname)"},
      {"hostname", OptionType::string, "", 0, 0, "IDENTIFY hostname (default: the hostname)"},
      {"user_agent", OptionType::string, "polybus/0.1.0", 0, 0, "IDENTIFY user_agent"},
      {"heartbeat_interval", OptionType::duration, "30s", -1, 60'000,
       "nsqd's heartbeat interval (-1: none); silence for twice this drops the connection"},
      {"output_buffer_size", OptionType::integer, "16384", -1, 64 << 20,
       "nsqd's output buffer for this client, bytes (-1: unbuffered)"},
      {"output_buffer_timeout", OptionType::duration, "250ms", -1, 60'000,
       "nsqd's output buffer flush timeout (-1: none)"},
      {"msg_timeout", OptionType::duration, "0", 0, 15 * 60'000,
       "how long nsqd waits for FIN before redelivering (0: nsqd's default; nsqd's minimum is 1s)"},
      {"sample_rate", OptionType::integer, "0", 0, 99,
       "percentage of messages nsqd sends (0: all)"},
      {"snappy", OptionType::boolean, "false", 0, 0, "compress the stream with snappy"},
      {"deflate", OptionType::boolean, "false", 0, 0, "compress the stream with deflate"},
      {"deflate_level", OptionType::integer, "6", 1, 9, "deflate level"},
      {"auth_secret", OptionType::string, "", 0, 0, "secret for AUTH when nsqd requires it"},
      {"lookupd_poll_interval", OptionType::duration, "60s", 10, 24 * hour,
       "how often nsqlookupd is asked for the topic's producers"},
      {"lookupd_poll_jitter", OptionType::integer, "30", 0, 100,
       "random extra delay on each lookupd poll, percent of the interval"},
      {"max_nsqd_connections", OptionType::integer, "100", 1, 100000,
       "nsqd a subscription connects to at most (nsqlookupd may list more)"},
      {"max_concurrent_dials", OptionType::integer, "16", 1, 1000,
       "nsqd connection attempts discovery makes at once (more while attempts time out, within "
       "half the descriptor limit for the process: docs/safety.md)"},
      {"max_dials_per_second", OptionType::integer, "5000", 1, 1000000,
       "nsqd connection attempts discovery starts a second at most"},
      {"rdy_redistribute_interval", OptionType::duration, "5s", 10, hour,
       "with more connections than max_in_flight, how often RDY moves between them"},
      {"backoff_strategy",
       OptionType::choice,
       "exponential",
       0,
       0,
       "consumer backoff after failures",
       {"exponential", "full_jitter"}},
      {"backoff_multiplier", OptionType::duration, "1s", 1, hour, "backoff unit"},
      {"publish_strategy",
       OptionType::choice,
       "least_pending",
       0,
       0,
       "how a publisher with several nsqd spreads its publishes: the one with the fewest "
       "unconfirmed (then the fewest sent), each in turn by messages sent, or the first up "
       "(failover); a failed nsqd is left out until it answers again",
       {"least_pending", "round_robin", "failover"}},
      {"max_backoff_duration", OptionType::duration, "2m", 0, 24 * hour,
       "cap on one backoff wait (0: no backoff)"},
  });
  table.add_rule({OptionRule::Kind::not_both_true, "snappy", "deflate",
                  "nsqd negotiates one compression per connection"});
  return table;
}

Settings Settings::from(const ResolvedOptions& options) {
  Settings s;
  auto& id = s.machine.identify;
  id.client_id = options.get_string("client_id");
  if (id.client_id.empty()) id.client_id = short_hostname();
  id.hostname = options.get_string("hostname");
  if (id.hostname.empty()) {
    char name[256] = {};
    id.hostname = gethostname(name, sizeof name - 1) == 0 ? name : "polybus";
  }
  id.user_agent = options.get_string("user_agent");
  id.feature_negotiation = true;
  id.heartbeat_interval = options.get_duration("heartbeat_interval").count();
  id.output_buffer_size = options.get_int("output_buffer_size");
  id.output_buffer_timeout = options.get_duration("output_buffer_timeout").count();
  if (auto t = options.get_duration("msg_timeout").count(); t > 0) id.msg_timeout = t;
  if (auto r = options.get_int("sample_rate"); r > 0) id.sample_rate = static_cast<int>(r);
  id.tls_v1 = options.get_bool("tls");
  id.snappy = options.get_bool("snappy");
  id.deflate = options.get_bool("deflate");
  if (id.deflate) id.deflate_level = static_cast<int>(options.get_int("deflate_level"));
  s.machine.auth_secret = options.get_string("auth_secret");
  s.machine.max_frame_size = static_cast<std::size_t>(options.get_int("max_frame_size"));
  s.machine.max_decoded_per_read =
      static_cast<std::size_t>(options.get_int("max_decoded_per_read"));
  s.transport = TransportSettings::from_options(options);
  // IDENTIFY (and TLS, AUTH) within connect_timeout too: nsqd answers nothing else before it.
  s.transport.handshake_timeout = s.transport.connect_timeout;
  s.read_timeout = options.get_duration("read_timeout");
  s.lookupd_poll_interval = options.get_duration("lookupd_poll_interval");
  s.lookupd_poll_jitter = options.get_int("lookupd_poll_jitter") / 100.0;
  s.max_nsqd_connections = static_cast<std::size_t>(options.get_int("max_nsqd_connections"));
  s.max_concurrent_dials = static_cast<std::size_t>(options.get_int("max_concurrent_dials"));
  s.max_dials_per_second = static_cast<std::size_t>(options.get_int("max_dials_per_second"));
  s.rdy_redistribute_interval = options.get_duration("rdy_redistribute_interval");
  s.backoff_multiplier = options.get_duration("backoff_multiplier");
  s.max_backoff_duration = options.get_duration("max_backoff_duration");
  s.backoff_full_jitter = options.get_string("backoff_strategy") == "full_jitter";
  const auto& strategy = options.get_string("publish_strategy");
  s.publish_strategy = strategy == "failover"      ? PublishStrategy::failover
                       : strategy == "round_robin" ? PublishStrategy::round_robin
                                                   : PublishStrategy::least_pending;
  s.max_requeue_delay = options.get_duration("max_requeue_delay");
  return s;
}

}  // namespace polybus::nsq
