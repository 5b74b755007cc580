// SPDX-License-Identifier: Apache-2.0
// The public Client and Subscription handles, and connect(): the scheme it names, from the
// registry, makes the adapter.
#include "polybus/client.hpp"

#include <asio/post.hpp>
#include <future>

#include "client_core.hpp"
#include "inbox.hpp"
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
  if (!runtime->own) core->shared()->watch_context(*runtime->io);
  runtime->on_escaped =
      [weak = std::weak_ptr<detail::ClientShared>(core->shared())](const std::string& what) {
        if (auto shared = weak.lock())
          shared->emit_error(make_error_code(errc::handler_failed),
                             "an exception left a handler of the io thread: " + what);
      };
  core->start(*scheme);
  if (runtime->own) detail::Runtime::start(runtime);
  auto shared = core->shared();
  auto handle =
      std::make_shared<detail::ClientHandle>(std::move(core), std::move(runtime), close_timeout);
  shared->set_handle(handle);
  return Client(std::move(handle));
}

// ---- Client and ClientRef ----

Client::Client(std::shared_ptr<detail::ClientHandle> handle) noexcept : handle_(std::move(handle)) {
  owning_ = true;
  owner_ = handle_.get();
  weak_ = handle_;
}

Client::Client(Client&& other) noexcept : ClientRef(), handle_(std::move(other.handle_)) {
  owning_ = true;
  owner_ = handle_.get();
  weak_ = handle_;
  other.owner_ = nullptr;
  other.weak_.reset();
}

Client& Client::operator=(Client&& other) noexcept {
  if (this == &other) return *this;
  auto taken = std::move(other.handle_);
  other.owner_ = nullptr;
  other.weak_.reset();
  owner_ = taken.get();
  weak_ = taken;
  handle_.swap(taken);  // what this one owned closes as `taken` goes
  return *this;
}

Client::~Client() = default;

bool ClientRef::expired() const noexcept {
  return owner_ ? false : weak_.expired();
}

bool ClientRef::empty() const noexcept {
  // Neither before nor after an empty weak_ptr in owner order: it shares no control block.
  const std::weak_ptr<detail::ClientHandle> none;
  return !owner_ && !weak_.owner_before(none) && !none.owner_before(weak_);
}

detail::ClientHandle* ClientRef::pin(std::shared_ptr<detail::ClientHandle>& keep) const {
  if (owner_) return owner_;
  if (owning_) throw Error(errc::invalid_argument, "empty polybus::Client (not connected)");
  keep = weak_.lock();
  return keep.get();
}

namespace {
std::string gone(std::string_view what) {
  return std::string(what) + ": the client is gone (its Client was dropped)";
}

// What a call through a reference whose client is gone completes with: at once, on the calling
// thread, as no strand is left to run it on.
template <typename Done, typename Result>
void complete_now(const Done& done, Result result) {
  if (!done) return;
  try {
    done(std::move(result));
  } catch (...) {
    // The client is gone: no error callback is left to tell.
  }
}

detail::ClientHandle& live(detail::ClientHandle* handle, std::string_view what) {
  if (!handle) throw Error(errc::closed, gone(what));
  return *handle;
}

// Waits for `start`'s completion, unless this thread runs the client's io_context: that thread
// would wait for itself (or stall every other client of an application's io_context).
template <typename Result, typename Start, typename Blocked>
Result wait_for(detail::ClientHandle& handle, Start start, Blocked on_io_thread) {
  if (handle.on_io_context()) return on_io_thread();
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  start([promise](Result result) { promise->set_value(std::move(result)); });
  return future.get();
}

Status would_block(const char* call) {
  return Status(errc::would_block_io_thread,
                std::string(call) +
                    " on a thread that runs the client's io_context (its io thread, or a thread of "
                    "the application's ConnectOptions::io_context): it would wait for that thread "
                    "itself; use the asynchronous form there");
}
}  // namespace

std::string ClientRef::scheme() const {
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "scheme").core->scheme();
}
Capabilities ClientRef::capabilities() const {
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "capabilities").core->capabilities();
}
bool ClientRef::carries_headers() const {
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "carries_headers").core->shared()->envelope.on();
}

void ClientRef::publish(std::string_view topic, std::string payload, Completion done) const {
  publish(topic, std::move(payload), PublishOptions{}, std::move(done));
}

void ClientRef::publish(std::string_view topic, std::string payload, PublishOptions options,
                        Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle)
    return complete_now(done, Status(errc::closed, gone("publish to " + std::string(topic))));
  handle->core->publish(topic, Payloads(std::move(payload)), std::move(done), std::move(options),
                        false);
}

void ClientRef::publish_batch(std::string_view topic, std::vector<std::string> payloads,
                              Completion done) const {
  publish_batch(topic, std::move(payloads), PublishOptions{}, std::move(done));
}

void ClientRef::publish_batch(std::string_view topic, std::vector<std::string> payloads,
                              PublishOptions options, Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle)
    return complete_now(done, Status(errc::closed, gone("publish to " + std::string(topic))));
  handle->core->publish(topic, Payloads(std::move(payloads)), std::move(done), std::move(options),
                        true);
}

Status ClientRef::publish_sync(std::string_view topic, std::string payload,
                               PublishOptions options) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return Status(errc::closed, gone("publish to " + std::string(topic)));
  return wait_for<Status>(
      *handle,
      [&](std::function<void(Status)> done) {
        handle->core->publish(topic, Payloads(std::move(payload)), std::move(done), options, false);
      },
      [] { return would_block("publish_sync"); });
}

Subscription ClientRef::subscribe(std::string_view topic, SubscribeOptions options,
                                  MessageHandler handler) const {
  if (!handler) throw Error(errc::invalid_argument, "subscribe: the handler is empty");
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "subscribe to " + std::string(topic))
      .core->subscribe(topic, std::move(options), std::move(handler), nullptr);
}

Subscription ClientRef::subscribe(std::string_view topic, MessageHandler handler) const {
  return subscribe(topic, SubscribeOptions{}, std::move(handler));
}

PullSubscription ClientRef::pull_subscribe(std::string_view topic, SubscribeOptions options) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto& handle = live(pin(keep), "pull_subscribe to " + std::string(topic));
  auto inbox = std::make_shared<detail::Inbox>(std::string(topic));
  Subscription subscription = handle.core->subscribe(
      topic, std::move(options), [inbox](Message& m) { inbox->deliver(m); }, nullptr);
  inbox->attach(subscription.core_);
  return PullSubscription(std::move(inbox), std::move(subscription));
}

PullSubscription ClientRef::pull_subscribe(std::string_view topic) const {
  return pull_subscribe(topic, SubscribeOptions{});
}

PullSubscription ClientRef::pull_serve(std::string_view topic, SubscribeOptions options) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto& handle = live(pin(keep), "pull_serve " + std::string(topic));
  auto inbox = std::make_shared<detail::Inbox>(std::string(topic));
  // Under the application's control, the request's reply is the application's to send: the
  // empty string returned here is not sent.
  Subscription subscription =
      handle.core->subscribe(topic, std::move(options), nullptr, [inbox](Message& m) {
        inbox->deliver(m);
        return std::string();
      });
  inbox->attach(subscription.core_);
  return PullSubscription(std::move(inbox), std::move(subscription));
}

PullSubscription ClientRef::pull_serve(std::string_view topic) const {
  return pull_serve(topic, SubscribeOptions{});
}

Subscription ClientRef::subscribe_batch(std::string_view topic, SubscribeOptions options,
                                        BatchOptions batch, BatchHandler handler) const {
  if (!handler) throw Error(errc::invalid_argument, "subscribe_batch: the handler is empty");
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "subscribe_batch to " + std::string(topic))
      .core->subscribe(topic, std::move(options), nullptr, nullptr, std::move(handler), batch);
}

Subscription ClientRef::serve(std::string_view topic, ServeHandler handler,
                              SubscribeOptions options) const {
  return serve(topic, std::move(options), std::move(handler));
}

Subscription ClientRef::serve(std::string_view topic, ServeHandler handler) const {
  return serve(topic, SubscribeOptions{}, std::move(handler));
}

Subscription ClientRef::serve(std::string_view topic, SubscribeOptions options,
                              ServeHandler handler) const {
  if (!handler) throw Error(errc::invalid_argument, "serve: the handler is empty");
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "serve " + std::string(topic))
      .core->subscribe(topic, std::move(options), nullptr, std::move(handler));
}

void ClientRef::request(std::string_view topic, std::string payload, ReplyCompletion done) const {
  request(topic, std::move(payload), RequestOptions{}, std::move(done));
}

void ClientRef::request(std::string_view topic, std::string payload, RequestOptions options,
                        ReplyCompletion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle)
    return complete_now(
        done,
        Reply{make_error_code(errc::closed), {}, gone("request to " + std::string(topic)), {}});
  handle->core->request(topic, std::move(payload), std::move(done), std::move(options));
}

Reply ClientRef::request_sync(std::string_view topic, std::string payload,
                              RequestOptions options) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle)
    return Reply{make_error_code(errc::closed), {}, gone("request to " + std::string(topic)), {}};
  return wait_for<Reply>(
      *handle,
      [&](std::function<void(Reply)> done) {
        handle->core->request(topic, std::move(payload), std::move(done), std::move(options));
      },
      [] {
        const Status blocked = would_block("request_sync");
        return Reply{blocked.code(), {}, blocked.cause(), {}};
      });
}

void ClientRef::flush(std::chrono::milliseconds timeout, Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return complete_now(done, Status(errc::closed, gone("flush")));
  handle->core->flush(timeout, std::move(done));
}

Status ClientRef::flush_sync(std::chrono::milliseconds timeout) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return Status(errc::closed, gone("flush"));
  return wait_for<Status>(
      *handle,
      [&](std::function<void(Status)> done) { handle->core->flush(timeout, std::move(done)); },
      [] { return would_block("flush_sync"); });
}

void ClientRef::ping(Completion done) const {
  ping(std::chrono::milliseconds(0), std::move(done));
}

void ClientRef::ping(std::chrono::milliseconds timeout, Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return complete_now(done, Status(errc::closed, gone("ping")));
  handle->core->ping(std::move(done), timeout);
}

void ClientRef::close(std::chrono::milliseconds timeout, Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return complete_now(done, Status{});  // closed with its Client
  handle->core->close(timeout, std::move(done));
}

void ClientRef::close(Completion done) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return complete_now(done, Status{});  // closed with its Client
  handle->core->close(handle->close_timeout, std::move(done));
}

Status ClientRef::close_sync(std::chrono::milliseconds timeout) const {
  std::shared_ptr<detail::ClientHandle> keep;
  auto* handle = pin(keep);
  if (!handle) return {};  // closed with its Client
  if (handle->on_io_context()) return would_block("close_sync");
  // The close waits for every running handler, this one too: waited for here, it could only
  // reach its deadline. It goes on once this handler returned.
  if (handle->on_handler_thread()) {
    handle->core->close(timeout, {});
    return {};
  }
  return wait_for<Status>(
      *handle,
      [&](std::function<void(Status)> done) { handle->core->close(timeout, std::move(done)); },
      [] { return would_block("close_sync"); });
}

Stats ClientRef::stats() const {
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "stats").core->shared()->stats.snapshot();
}
metrics::ClientMetrics ClientRef::metrics() const {
  std::shared_ptr<detail::ClientHandle> keep;
  return live(pin(keep), "metrics").core->metrics();
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
void Subscription::wait_ready(std::chrono::milliseconds timeout,
                              std::function<void(const Status&)> done) const {
  sub_of(core_).wait_ready(timeout, std::move(done));
}
void Subscription::unsubscribe(std::function<void(const Status&)> done) {
  sub_of(core_).unsubscribe(std::move(done));
}
Status Subscription::unsubscribe_sync(std::chrono::milliseconds timeout) {
  auto& sub = sub_of(core_);
  // Confirmed on the strand: waited for there, it could only time out.
  if (sub.on_io_context())
    return Status(errc::would_block_io_thread,
                  "unsubscribe_sync from " + sub.topic() +
                      " on a thread that runs the client's io_context (its io thread, or a thread "
                      "of the application's ConnectOptions::io_context): it would wait for that "
                      "thread itself; use unsubscribe() there");
  // From one of its own handlers: the broker's confirmation can wait for that handler's
  // message (NSQ's CLS drains what is in flight), so it is not waited for.
  if (detail::SubscriptionCore::current() == &sub) {
    sub.unsubscribe({});
    return {};
  }
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
