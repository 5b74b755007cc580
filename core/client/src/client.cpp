// SPDX-License-Identifier: Apache-2.0
// The public Client and Subscription handles, and connect(): the scheme it names, from the
// registry, makes the adapter.
#include "polybus/client.hpp"

#include <asio/post.hpp>
#include <future>

#include "client_core.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"

namespace polybus {

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
  return Client(
      std::make_shared<detail::ClientHandle>(std::move(core), std::move(runtime), close_timeout));
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

const std::string& Client::scheme() const {
  return core_of(handle_).scheme();
}
Capabilities Client::capabilities() const {
  return core_of(handle_).capabilities();
}
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

Subscription Client::subscribe_batch(std::string_view topic, SubscribeOptions options,
                                     BatchOptions batch, BatchHandler handler) {
  if (!handler) throw Error(errc::invalid_argument, "subscribe_batch: the handler is empty");
  return core_of(handle_).subscribe(topic, std::move(options), nullptr, nullptr, std::move(handler),
                                    batch);
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

void Client::flush(std::chrono::milliseconds timeout, Completion done) {
  core_of(handle_).flush(timeout, std::move(done));
}

Status Client::flush_sync(std::chrono::milliseconds timeout) {
  auto& core = core_of(handle_);
  return wait_for<Status>(
      core, [&](std::function<void(Status)> done) { flush(timeout, std::move(done)); },
      Status(errc::would_block_io_thread, "flush_sync on the io thread"));
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

Stats Client::stats() const {
  return core_of(handle_).shared()->stats.snapshot();
}
metrics::ClientMetrics Client::metrics() const {
  return core_of(handle_).metrics();
}

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
    return Status(errc::timeout,
                  "unsubscribe not confirmed within " + std::to_string(timeout.count()) + "ms");
  return future.get();
}
void Subscription::pause() {
  sub_of(core_).pause();
}
void Subscription::resume() {
  sub_of(core_).resume();
}
void Subscription::set_max_in_flight(std::uint32_t n) {
  sub_of(core_).set_max_in_flight(n);
}
bool Subscription::active() const {
  return core_ && core_->active();
}
std::size_t Subscription::pending() const {
  return core_ ? core_->pending() : 0;
}

}  // namespace polybus
