// The public Client and Subscription handles, connect(), the scheme registry and the context
// adapters are given.
#include "polybus/client.hpp"

#include <asio/post.hpp>
#include <future>

#include "client_core.hpp"
#include "polybus/error.hpp"
#include "polybus/adapter/registry.hpp"

namespace polybus {

// ---- registry ----

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

// ---- AdapterContext and Adapter defaults ----

AdapterContext::AdapterContext(Strand strand, Url url, ResolvedOptions options,
                               std::shared_ptr<detail::ClientShared> shared)
    : strand_(std::move(strand)), url_(std::move(url)), options_(std::move(options)),
      budget_(Budget::from_options(options_)), shared_(std::move(shared)) {}

void AdapterContext::state(ConnectionState state, const std::string& endpoint,
                           std::error_code reason, const std::string& detail,
                           std::chrono::milliseconds retry_in) const {
  if (shared_->closed.load()) return;  // the application heard closed: nothing after it
  shared_->connectivity.on_state(state, endpoint, reason, detail, retry_in);
  if (state == ConnectionState::reconnecting && shared_->on_retry_scheduled)
    shared_->on_retry_scheduled();
  if (shared_->on_state) {
    try {
      shared_->on_state(StateEvent{state, endpoint, reason, detail, retry_in});
    } catch (...) {
    }
  }
  if (shared_->logs(reason ? LogLevel::warn : LogLevel::info)) {
    std::string line = endpoint + ": " + to_string(state);
    if (state == ConnectionState::reconnecting)
      line += " in " + std::to_string(retry_in.count()) + "ms";
    if (reason) line += " (" + (detail.empty() ? reason.message() : detail) + ")";
    shared_->log(reason ? LogLevel::warn : LogLevel::info, line);
  }
}
void AdapterContext::error(std::error_code ec, const std::string& message) const {
  shared_->emit_error(ec, message);
}
void AdapterContext::log(LogLevel level, std::string_view text) const { shared_->log(level, text); }
bool AdapterContext::logs(LogLevel level) const { return shared_->logs(level); }
void AdapterContext::count_bytes_in(std::size_t n) const { shared_->stats.bytes_in += n; }
void AdapterContext::count_bytes_out(std::size_t n) const { shared_->stats.bytes_out += n; }
void AdapterContext::count_reconnect() const { ++shared_->stats.reconnects; }
bool AdapterContext::has_custom_backoff() const { return shared_->custom_backoff.has_value(); }
Backoff AdapterContext::backoff() const {
  return shared_->custom_backoff ? *shared_->custom_backoff : Backoff::from_options(options_);
}

std::shared_ptr<detail::MessageState> AdapterContext::make_message(
    std::weak_ptr<MessageBackend> backend) const {
  // The allocator holds the client's shared state for as long as the message lives.
  auto state =
      std::allocate_shared<detail::MessageState>(detail::PooledAllocator<detail::MessageState>(
          std::shared_ptr<detail::BlockPool>(shared_, &shared_->message_blocks)));
  state->backend = std::move(backend);
  state->client = shared_.get();
  return state;
}

void Adapter::request(RequestWork work) { work.done(make_error_code(errc::not_supported)); }
std::shared_ptr<AdapterSubscription> Adapter::serve(const ServeSpec&,
                                                    std::shared_ptr<SubscriptionSink>) {
  throw Error(errc::not_supported, "serve is not supported by this adapter");
}
void Adapter::ping(OpCompletion done) { done(make_error_code(errc::not_supported)); }

// ---- connect ----

Client connect(std::string_view text, ConnectOptions options) {
  Url url = Url::parse(text);
  const std::shared_ptr<const SchemeInfo> scheme = find_scheme(url.scheme);
  if (!scheme) {
    std::string known;
    for (const auto& name : registered_schemes()) known += (known.empty() ? "" : ", ") + name;
    throw Error(errc::unknown_scheme, "no adapter for scheme '" + url.scheme +
                                          "' (registered: " + known +
                                          "; link its library and call its register function, "
                                          "or polybus::register_all_schemes())");
  }
  Options merged = url.query;
  for (const auto& [key, value] : options.options.values()) merged.set(key, value);
  ResolvedOptions resolved = ResolvedOptions::resolve(scheme->options, merged, url.scheme);

  auto runtime = std::make_shared<detail::Runtime>();
  if (options.io_context) {
    runtime->io = options.io_context;
  } else {
    runtime->own = std::make_unique<asio::io_context>(1);
    runtime->io = runtime->own.get();
    runtime->work.emplace(runtime->io->get_executor());
  }
  auto strand = asio::make_strand(*runtime->io);
  auto close_timeout = resolved.get_duration("close_timeout");
  auto core = std::make_shared<detail::ClientCore>(*scheme, std::move(url), std::move(resolved),
                                                   std::move(options), strand);
  core->shared()->runtime = runtime;
  core->start(*scheme);
  if (runtime->own) detail::Runtime::start(runtime);
  return Client(std::make_shared<detail::ClientHandle>(std::move(core), std::move(runtime),
                                                       close_timeout));
}

// ---- Client ----

namespace {
detail::ClientCore& core_of(const std::shared_ptr<detail::ClientHandle>& handle) {
  if (!handle) throw Error(errc::invalid_argument, "empty polybus::Client (not connected)");
  return *handle->core;
}

template <typename Result, typename Start>
Result wait_for(detail::ClientCore& core, Start start, Result on_io_thread) {
  if (core.on_strand()) return on_io_thread;
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  start([promise](Result result) { promise->set_value(std::move(result)); });
  return future.get();
}
}  // namespace

const std::string& Client::scheme() const { return core_of(handle_).scheme(); }
Capabilities Client::capabilities() const { return core_of(handle_).capabilities(); }
bool Client::carries_headers() const {
  return core_of(handle_).shared()->envelope.on();
}

void Client::publish(std::string_view topic, std::string payload, Completion done,
                     PublishOptions options) {
  core_of(handle_).publish(topic, Payloads(std::move(payload)), std::move(done), options, false);
}

void Client::publish_batch(std::string_view topic, std::vector<std::string> payloads,
                           Completion done, PublishOptions options) {
  core_of(handle_).publish(topic, Payloads(std::move(payloads)), std::move(done), options, true);
}

Status Client::publish_sync(std::string_view topic, std::string payload, PublishOptions options) {
  auto& core = core_of(handle_);
  return wait_for<Status>(
      core,
      [&](std::function<void(Status)> done) {
        publish(topic, std::move(payload), std::move(done), options);
      },
      Status(errc::would_block_io_thread, "publish_sync on the io thread"));
}

Subscription Client::subscribe(std::string_view topic, SubscribeOptions options,
                               MessageHandler handler) {
  if (!handler) throw Error(errc::invalid_argument, "subscribe: the handler is empty");
  return core_of(handle_).subscribe(topic, std::move(options), std::move(handler), nullptr);
}

Subscription Client::serve(std::string_view topic, ServeHandler handler, SubscribeOptions options) {
  if (!handler) throw Error(errc::invalid_argument, "serve: the handler is empty");
  return core_of(handle_).subscribe(topic, std::move(options), nullptr, std::move(handler));
}

void Client::request(std::string_view topic, std::string payload, ReplyCompletion done,
                     std::chrono::milliseconds timeout) {
  core_of(handle_).request(topic, std::move(payload), std::move(done), RequestOptions{timeout, {}});
}

void Client::request(std::string_view topic, std::string payload, ReplyCompletion done,
                     RequestOptions options) {
  core_of(handle_).request(topic, std::move(payload), std::move(done), std::move(options));
}

Reply Client::request_sync(std::string_view topic, std::string payload,
                           std::chrono::milliseconds timeout) {
  return request_sync(topic, std::move(payload), RequestOptions{timeout, {}});
}

Reply Client::request_sync(std::string_view topic, std::string payload, RequestOptions options) {
  auto& core = core_of(handle_);
  return wait_for<Reply>(
      core,
      [&](std::function<void(Reply)> done) {
        request(topic, std::move(payload), std::move(done), std::move(options));
      },
      Reply{make_error_code(errc::would_block_io_thread), {}, "request_sync on the io thread", {}});
}

void Client::ping(Completion done, std::chrono::milliseconds timeout) {
  core_of(handle_).ping(std::move(done), timeout);
}

void Client::close(std::chrono::milliseconds timeout, Completion done) {
  core_of(handle_).close(timeout, std::move(done));
}

Status Client::close_sync(std::chrono::milliseconds timeout) {
  auto& core = core_of(handle_);
  return wait_for<Status>(
      core, [&](std::function<void(Status)> done) { close(timeout, std::move(done)); },
      Status(errc::would_block_io_thread, "close_sync on the io thread"));
}

Stats Client::stats() const { return core_of(handle_).shared()->stats.snapshot(); }
metrics::ClientMetrics Client::metrics() const { return core_of(handle_).metrics(); }

// ---- Subscription ----

namespace {
detail::SubscriptionCore& sub_of(const std::shared_ptr<detail::SubscriptionCore>& core) {
  if (!core) throw Error(errc::invalid_argument, "empty polybus::Subscription");
  return *core;
}
}  // namespace

Status Subscription::wait_ready(std::chrono::milliseconds timeout) const {
  return sub_of(core_).wait_ready(timeout);
}
void Subscription::unsubscribe(std::function<void(const Status&)> done) {
  sub_of(core_).unsubscribe(std::move(done));
}
Status Subscription::unsubscribe_sync(std::chrono::milliseconds timeout) {
  // Confirmed on the strand: waited for there, it could only time out.
  if (sub_of(core_).on_strand())
    return Status(errc::would_block_io_thread, "unsubscribe_sync on the io thread");
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  unsubscribe([promise](const Status& status) { promise->set_value(status); });
  if (future.wait_for(timeout) != std::future_status::ready)
    return Status(errc::timeout, "unsubscribe not confirmed within " +
                                     std::to_string(timeout.count()) + "ms");
  return future.get();
}
void Subscription::pause() { sub_of(core_).pause(); }
void Subscription::resume() { sub_of(core_).resume(); }
void Subscription::set_max_in_flight(std::uint32_t n) { sub_of(core_).set_max_in_flight(n); }
bool Subscription::active() const { return core_ && core_->active(); }
std::size_t Subscription::pending() const { return core_ ? core_->pending() : 0; }

}  // namespace polybus
