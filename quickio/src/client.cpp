// SPDX-License-Identifier: Apache-2.0
// The native Client: a thread-safe front over the connection; every call is posted to its strand.
#include "polybus/quickio/client.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <thread>

#include "connection.hpp"
#include "options.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio/codec.hpp"

namespace polybus::quickio {

std::error_code ServerCallback::reply(int code, std::string data_json, std::string err_msg) {
  if (!state_) return make_error_code(polybus::errc::invalid_argument);
  if (state_->answered.exchange(true)) return make_error_code(polybus::errc::already_responded);
  auto responder = state_->responder.lock();
  if (!responder) return make_error_code(polybus::errc::closed);
  return responder->answer(state_->connection, state_->id, code, std::move(data_json),
                           std::move(err_msg));
}

namespace {

// The io thread a client owns, when it was given no io_context.
struct OwnThread {
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{io.get_executor()};
  std::thread thread;
};

}  // namespace

struct Client::Impl : detail::Responder, std::enable_shared_from_this<Client::Impl> {
  // Destroyed last: the connection's timers and sockets belong to its io_context.
  std::shared_ptr<OwnThread> own;
  std::optional<Strand> strand;
  std::shared_ptr<detail::Connection> connection;
  std::atomic<ListenerId> next_listener{1};
  std::atomic<bool> closed{false};
  // Bytes of callback-less sends posted to the strand and not yet taken by the session: counted
  // against max_queued_bytes with what is queued, so that the bound holds at the caller.
  std::atomic<std::size_t> in_transit{0};
  ErrorCallback on_error;

  std::error_code answer(std::uint64_t number, std::uint64_t callback_id, int code,
                         std::string data_json, std::string err_msg) override {
    if (closed.load()) return make_error_code(polybus::errc::closed);
    if (connection->open_connection() != number)
      return make_error_code(polybus::errc::disconnected);
    if (!data_json.empty() && !is_valid_json(data_json))
      return make_error_code(polybus::errc::invalid_argument);
    asio::post(*strand, [connection = connection, number, callback_id, code,
                         data = std::move(data_json), err = std::move(err_msg)] {
      connection->machine().answer(number, callback_id, code, data, err);
    });
    return {};
  }

  template <typename Fn>
  void run(Fn fn) {
    asio::post(*strand,
               [connection = connection, fn = std::move(fn)]() mutable { fn(*connection); });
  }

  // The handle to answer a callback the server asked for on `connection` (none for id 0).
  static ServerCallback callback_for(const std::weak_ptr<Impl>& weak, std::uint64_t connection,
                                     std::uint64_t id) {
    if (id == 0) return {};
    auto state = std::make_shared<detail::ServerCallbackState>();
    state->responder = weak;
    state->connection = connection;
    state->id = id;
    return ServerCallback(std::move(state));
  }

  detail::ListenerFn wrap(Listener listener) {
    std::weak_ptr<Impl> weak = shared_from_this();
    return [weak, listener = std::move(listener)](const detail::Incoming& event) {
      listener(event.json, callback_for(weak, event.connection, event.server_callback));
    };
  }

  // A send's callback as the machine calls it: the answer as a Status, and the callback the
  // answer asks for in turn as a handle.
  detail::CallbackFn answering(const std::string& path, SendCallback callback) {
    if (!callback) return {};
    std::weak_ptr<Impl> weak = shared_from_this();
    return [weak, path, callback = std::move(callback)](const detail::Answer& answer) {
      callback(answer_status(path, answer.code, answer.err_msg), answer.data_json,
               callback_for(weak, answer.connection, answer.server_callback));
    };
  }

  static detail::SubscribeResultFn subscribing(const std::string& path, SubscribeResult result) {
    if (!result) return {};
    return [path, result = std::move(result)](int code, std::string_view err_msg) {
      result(answer_status(path, code, err_msg));
    };
  }

  ListenerId listen(std::string_view path, Listener listener, SubscribeResult result, bool once) {
    ListenerId id = next_listener.fetch_add(1);
    if (closed.load()) return id;
    run([path = std::string(path), fn = wrap(std::move(listener)), result = std::move(result), once,
         id](detail::Connection& e) mutable {
      if (e.closed()) {
        if (result) result(answer_status(path, -1, "closed"));
        return;
      }
      e.machine().on(path, std::move(fn), once, subscribing(path, std::move(result)), id);
    });
    return id;
  }
};

Client::Client(std::string_view url_text, ClientOptions options) : impl_(std::make_shared<Impl>()) {
  Url url = Url::parse(url_text);
  Options merged = url.query;
  for (const auto& [key, value] : options.options.values()) merged.set(key, value);
  auto resolved = ResolvedOptions::resolve(detail::option_table(), merged, url.scheme);
  auto settings = detail::ConnectionSettings::from(url, resolved);

  asio::io_context* io = options.io_context;
  if (!io) {
    impl_->own = std::make_shared<OwnThread>();
    io = &impl_->own->io;
  }
  impl_->strand.emplace(asio::make_strand(*io));
  impl_->on_error = options.on_error;

  detail::ConnectionHooks hooks;
  hooks.error = options.on_error;
  if (options.log) {
    hooks.log = [sink = options.log, level = options.log_level](LogLevel l, std::string_view text) {
      if (static_cast<int>(l) >= static_cast<int>(level)) sink(l, text);
    };
  }
  hooks.subscription_refused = [on_error = options.on_error](const std::string& path, int code,
                                                             const std::string& err_msg) {
    if (on_error)
      on_error(
          make_error_code(polybus::errc::broker_error),
          "quickio: subscription to " + path + " refused: " + std::to_string(code) + " " + err_msg);
  };
  impl_->connection = std::make_shared<detail::Connection>(*impl_->strand, settings,
                                                           Backoff::from_options(resolved), hooks);
  if (options.connect_now) impl_->connection->start();
  if (impl_->own) impl_->own->thread = std::thread([own = impl_->own] { own->io.run(); });
}

Client::~Client() {
  close();
  if (!impl_->own) return;
  auto own = impl_->own;
  asio::post(*impl_->strand, [own] { own->work.reset(); });
  if (own->thread.get_id() == std::this_thread::get_id()) {
    own->thread.detach();  // a callback destroyed its client: the thread ends on its own
  } else {
    own->thread.join();
  }
}

ListenerId Client::on(std::string_view path, Listener listener, SubscribeResult result) {
  return impl_->listen(path, std::move(listener), std::move(result), false);
}

ListenerId Client::one(std::string_view path, Listener listener, SubscribeResult result) {
  return impl_->listen(path, std::move(listener), std::move(result), true);
}

void Client::off(std::string_view path) {
  impl_->run([path = std::string(path)](detail::Connection& e) { e.machine().off(path); });
}

void Client::off(std::string_view path, ListenerId id) {
  impl_->run([path = std::string(path), id](detail::Connection& e) { e.machine().off(path, id); });
}

std::error_code Client::send(std::string_view path, std::string json, SendCallback callback) {
  if (impl_->closed.load()) {
    if (callback)
      asio::post(*impl_->strand, [callback, what = std::string(path)] {
        callback(answer_status(what, -1, "closed"), "null", ServerCallback());
      });
    return make_error_code(polybus::errc::closed);
  }
  if (!is_valid_json(json)) return make_error_code(polybus::errc::invalid_argument);
  auto& connection = *impl_->connection;
  // The event's text: path, ':', id, '=', json (the path only shrinks when cleaned).
  const std::size_t size = callback ? 0 : path.size() + json.size() + 3;
  if (size != 0) {
    std::size_t before = impl_->in_transit.fetch_add(size);
    if (connection.open_connection() == 0 &&
        before + size + connection.queued_bytes() > connection.max_queued_bytes()) {
      impl_->in_transit.fetch_sub(size);
      return make_error_code(client_errc::queue_full);
    }
  }
  impl_->run([impl = impl_, size, path = std::string(path), json = std::move(json),
              callback = std::move(callback),
              on_error = impl_->on_error](detail::Connection& e) mutable {
    std::error_code ec = make_error_code(polybus::errc::closed);
    if (!e.closed())
      ec = e.machine().send(path, json, impl->answering(path, std::move(callback)));
    else if (callback)
      callback(answer_status(path, -1, "closed"), "null", ServerCallback());
    impl->in_transit.fetch_sub(size);
    if (ec && on_error) on_error(ec, "quickio: event to " + path + " dropped: " + ec.message());
  });
  return {};
}

void Client::reconnect() {
  impl_->run([](detail::Connection& e) { e.reconnect(); });
}

void Client::close() {
  if (impl_->closed.exchange(true)) return;
  impl_->run([](detail::Connection& e) { e.close(); });
}

bool Client::connected() const {
  return impl_->connection->open_connection() != 0;
}

}  // namespace polybus::quickio
