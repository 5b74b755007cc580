// SPDX-License-Identifier: Apache-2.0
// The MemoDB adapter: request/reply only, over req0 of our own (see connection.hpp). memodb+tcp
// and memodb+ipc share everything but the address.
#include <mutex>

#include "connection.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/memodb.hpp"

namespace polybus::memodb {
namespace {

Capabilities memodb_capabilities() {
  Capabilities c;
  c.request_reply = true;
  c.reconnect_policy = true;
  c.publish = false;
  c.subscribe = false;
  c.publish_confirmed = false;
  c.reply_errors = false;  // memo01 hands the requester a RESULT payload and nothing else
  return c;
}

OptionTable memodb_options() {
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

detail::ConnectionSettings settings_for(const AdapterContext& context) {
  const auto& o = context.options();
  if (o.get_bool("tls"))
    throw Error(
        polybus::errc::not_supported,
        "memodb: memo01 has no TLS (the protocol leaves encryption to a tunnel such as spiped)");
  detail::ConnectionSettings s;
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

class MemoDbAdapter : public Adapter {
 public:
  explicit MemoDbAdapter(AdapterContext& context)
      : connection_(std::make_shared<detail::Connection>(context, settings_for(context))),
        workers_option_(static_cast<std::uint32_t>(context.options().get_int("workers"))) {
    connection_->open();
  }
  // Nothing runs after this: the connection is closed and every exchange completed.
  ~MemoDbAdapter() override { connection_->shutdown(); }

  Capabilities capabilities() const override { return memodb_capabilities(); }
  void publish(PublishWork work) override {
    work.done(make_error_code(polybus::errc::not_supported), {},
              "memodb: no publish (a job needs a worker's result: use request)");
  }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink>) override {
    throw Error(polybus::errc::not_supported, "memodb: no subscribe (request/reply only)");
  }
  void request(RequestWork work) override { connection_->request(std::move(work)); }
  std::shared_ptr<AdapterSubscription> serve(const ServeSpec& spec,
                                             std::shared_ptr<SubscriptionSink> sink) override {
    // The workers option, when set, else one worker per handler the core runs for this serve.
    const std::uint32_t workers = workers_option_ > 0 ? workers_option_ : spec.concurrency;
    return connection_->serve(spec.topic, std::max<std::uint32_t>(1, workers), std::move(sink));
  }
  void close(Clock::time_point deadline, std::function<void()> done) override {
    connection_->close(deadline, std::move(done));
  }

 private:
  std::shared_ptr<detail::Connection> connection_;
  std::uint32_t workers_option_;  // 0: follow the serve's concurrency
};

SchemeInfo scheme_info(const char* scheme, const char* summary) {
  SchemeInfo info;
  info.scheme = scheme;
  info.summary = summary;
  info.options = memodb_options();
  info.capabilities = memodb_capabilities();
  info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
    return std::make_unique<MemoDbAdapter>(context);
  };
  return info;
}

}  // namespace

void register_scheme() {
  // Once: registering again would rewrite the entries while another thread may be connecting.
  static std::once_flag once;
  std::call_once(once, [] {
    polybus::register_scheme(scheme_info("memodb+tcp",
                                         "MemoDB broker (memo01 over NNG's req/rep, "
                                         "tcp://host:port): request/reply jobs and workers"));
    polybus::register_scheme(scheme_info(
        "memodb+ipc",
        "MemoDB broker (memo01 over NNG's req/rep, ipc:///path): request/reply jobs and workers"));
  });
}

}  // namespace polybus::memodb
