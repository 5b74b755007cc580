// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

#include "polybus/error.hpp"

namespace polybus::memodb::detail {
namespace {

// memodb+tcp://host:port (a name, IPv4, or [IPv6]) -> tcp://...; memodb+ipc:///path -> ipc:///path
// (the addresses as NNG writes them, which the broker's documentation uses).
std::string address_for(const Url& url) {
  if (url.scheme == "memodb+ipc") {
    if (!url.hosts.empty() || url.path.size() < 2)
      throw Error(polybus::errc::invalid_url,
                  "memodb+ipc: expected memodb+ipc:///absolute/path (no host)");
    return "ipc://" + url.path;
  }
  if (url.hosts.size() != 1 || url.hosts[0].port == 0 || !url.path.empty())
    throw Error(polybus::errc::invalid_url,
                "memodb+tcp: expected memodb+tcp://host:port (one broker, a port, no path)");
  return "tcp://" + url.hosts[0].to_string();
}

}  // namespace

OptionTable option_table() {
  constexpr std::int64_t hour = 3'600'000;
  OptionTable table = core_option_table();
  table.add({
      {"max_requests", OptionType::integer, "8", 1, 65536,
       "requests sent to the broker at once; more wait, in order, up to their deadline (the real "
       "broker serves jobs queued beyond its workers out of order: raise it toward the number of "
       "workers, not past it; docs/memodb.md)"},
      {"workers", OptionType::integer, "0", 0, 1024,
       "workers per serve() (0: one per handler the serve runs at once, SubscribeOptions::"
       "concurrency, else handler_concurrency); Subscription::set_max_in_flight changes it"},
      {"job_timeout", OptionType::duration, "0", 0, 24 * hour,
       "JOB's timeout: how long the broker waits for the worker's RESULT (0: what is left of the "
       "request's deadline)"},
      {"queue_timeout", OptionType::duration, "10s", 1, hour,
       "how long the broker keeps a job no worker takes (10 s in the real broker); a request is "
       "resent only after this plus job_timeout, so no worker runs a job twice"},
      {"heartbeat_interval", OptionType::duration, "10s", 1, hour,
       "idle time after which the broker sends a worker HEARTBEAT (10 s in the real broker); "
       "worker requests are resent only after this plus heartbeat_timeout"},
      {"heartbeat_timeout", OptionType::duration, "10s", 1, hour,
       "how long the broker waits for a worker's answer to HEARTBEAT (10 s in the real broker)"},
  });
  return table;
}

ConnectionSettings settings_for(const AdapterContext& context) {
  const auto& o = context.options();
  if (o.get_bool("tls"))
    throw Error(
        polybus::errc::not_supported,
        "memodb: memo01 has no TLS (the protocol leaves encryption to a tunnel such as spiped)");
  ConnectionSettings s;
  s.address = address_for(context.url());
  s.heartbeat_interval = o.get_duration("heartbeat_interval");
  s.heartbeat_timeout = o.get_duration("heartbeat_timeout");
  s.queue_timeout = o.get_duration("queue_timeout");
  s.job_timeout = o.get_duration("job_timeout");
  s.max_requests = static_cast<std::uint32_t>(o.get_int("max_requests"));
  s.max_message = static_cast<std::size_t>(o.get_int("max_frame_size"));
  s.connect_timeout = o.get_duration("connect_timeout");
  s.frame_timeout = o.get_duration("frame_timeout");
  s.write_timeout = o.get_duration("write_timeout");
  return s;
}

}  // namespace polybus::memodb::detail
