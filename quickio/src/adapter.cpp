// SPDX-License-Identifier: Apache-2.0
// The QuickIO adapter: publish = an event to "/"+topic without a callback; subscribe and serve
// = listeners (on); request = an event with a callback; ping = /qio/ping with a callback.
// Payloads are JSON strings (payload=text) or JSON text (payload=json).
#include <asio/post.hpp>
#include <charconv>

#include "connection.hpp"
#include "options.hpp"
#include "paused_sink.hpp"
#include "polybus/adapter/budget.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/io/kept_copies.hpp"
#include "polybus/quickio.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"

namespace polybus::quickio {
namespace {

// The code a serve handler's failure travels with, and the prefix that tells it from a
// server's own 500.
constexpr int kHandlerFailedCode = 500;
constexpr std::string_view kHandlerFailedPrefix = "handler failed: ";

Capabilities quickio_capabilities() {
  Capabilities c;
  c.publish = true;
  c.subscribe = true;
  c.request_reply = true;
  c.reply_errors = true;  // an answer's error code reaches the requester
  c.reconnect_policy = true;
  c.ordered_delivery = true;
  c.publish_confirmed = false;  // QuickIO does not acknowledge events
  return c;
}

std::error_code map_callback_code(int code, std::string_view err_msg) {
  if (code == 200) return {};
  if (code == -1) return make_error_code(polybus::errc::disconnected);
  if (code == 404) return make_error_code(polybus::errc::no_responder);
  if (code == kHandlerFailedCode &&
      err_msg.substr(0, kHandlerFailedPrefix.size()) == kHandlerFailedPrefix)
    return make_error_code(polybus::errc::handler_failed);
  return make_error_code(polybus::errc::broker_error);
}

class QuickioBackend : public MessageBackend, public std::enable_shared_from_this<QuickioBackend> {
 public:
  explicit QuickioBackend(const AdapterContext& context)
      : ctx_(context), json_payloads_(context.options().get_string("payload") == "json") {}

  void start() {
    detail::ConnectionHooks hooks;
    std::weak_ptr<QuickioBackend> weak = weak_from_this();
    AdapterContext ctx = ctx_;
    hooks.state = [ctx](ConnectionState s, const std::string& endpoint, std::error_code reason,
                        const std::string& detail, std::chrono::milliseconds retry_in) {
      ctx.state(s, endpoint, reason, detail, retry_in);
    };
    hooks.error = [ctx](std::error_code ec, const std::string& message) { ctx.error(ec, message); };
    hooks.log = [ctx](LogLevel level, std::string_view text) {
      if (ctx.logs(level)) ctx.log(level, text);
    };
    hooks.subscription_refused = [weak](const std::string& path, int code, const std::string& err) {
      if (auto self = weak.lock()) self->refused(path, code, err);
    };
    connection_ = std::make_shared<detail::Connection>(
        ctx_.strand(), detail::ConnectionSettings::from(ctx_.url(), ctx_.options()), ctx_.backoff(),
        std::move(hooks), &ctx_);
    // Requests and pings made while no connection is open wait for the next one (up to their
    // deadline): the document's rule 5, "save a reference to the callback until connected".
    connection_->machine().on("/open", [weak](const detail::Incoming&) {
      if (auto self = weak.lock()) self->release_awaiting();
    });
    connection_->start();
  }

  void release_awaiting() {
    auto awaiting = std::move(awaiting_open_);
    awaiting_open_.clear();
    awaiting_requests_ = 0;
    ctx_.waiting_requests(0);
    for (auto& send : awaiting) send();
  }

  // Sends now when a connection is open, else when the next one opens (unless done by then).
  // request: a request (counted in the metrics' waiting requests meanwhile), not a ping.
  void send_with_callback(std::string path, std::string json, OpCompletion done,
                          detail::CallbackFn callback, bool request) {
    if (!connection_->machine().is_open()) {
      awaiting_open_.push_back([this, path = std::move(path), json = std::move(json), done,
                                callback = std::move(callback)]() mutable {
        if (!done.done()) send_now(path, json, done, std::move(callback));
      });
      if (request) ctx_.waiting_requests(++awaiting_requests_);
      return;
    }
    send_now(path, json, done, std::move(callback));
  }

  void send_now(const std::string& path, const std::string& json, OpCompletion& done,
                detail::CallbackFn callback) {
    // Refused (over max_queued_bytes): the callback was not kept, so the operation ends here.
    if (auto ec = connection_->machine().send(path, json, std::move(callback)))
      done(ec, {}, refusal(ec));
  }

  ~QuickioBackend() override {
    if (connection_) asio::post(ctx_.strand(), [connection = connection_] { connection->close(); });
  }

  // The event path of a topic: QuickIO users write "/pub/room", portable code "pub/room"; both
  // name the path /pub/room. Anything that is not already a clean path is refused, naming it.
  std::error_code path_of(const std::string& topic, std::string& path, std::string& why) const {
    path.clear();  // built in place: a caller's reused buffer allocates nothing per publish
    if (topic.empty() || topic.front() != '/') path.push_back('/');
    path.append(topic);
    if (path.size() < 2 || !is_clean_path(path) || detail::Machine::is_local_path(path)) {
      why = "quickio: topic '" + topic +
            "' is not a plain event path ([A-Za-z0-9_/-] with an optional leading '/'; no "
            "trailing or repeated '/'; not qio/..., open, close or error)";
      return make_error_code(polybus::errc::invalid_argument);
    }
    return {};
  }

  std::error_code check(std::string_view payload, std::string& why) const {
    if (json_payloads_) {
      if (!is_valid_json(payload)) {
        why = "quickio: payload is not valid JSON (payload=json sends it verbatim)";
        return make_error_code(polybus::errc::invalid_argument);
      }
      return {};
    }
    if (!text::is_valid_utf8(payload)) {
      why =
          "quickio: payload is not UTF-8 (payload=text sends it as a JSON string; use "
          "payload=json for JSON, or encode binary data yourself)";
      return make_error_code(polybus::errc::invalid_argument);
    }
    return {};
  }

  // A checked payload's event data: itself in JSON mode, else a JSON string (in scratch_).
  std::string_view encode(std::string_view payload) {
    if (json_payloads_) return payload;
    scratch_.clear();
    text::append_json_quoted(scratch_, payload);
    return scratch_;
  }

  // The payload of a received event: a JSON string's text (a view when it has no escapes) in
  // text mode, else the JSON text itself.
  void decode(const detail::Incoming& event, polybus::detail::MessageState& state) const {
    // The event's JSON as checked, which may have white space around it: without it, a string
    // ends in its closing quote.
    std::string_view json = text::trim_json_space(event.json);
    const std::shared_ptr<const void>& owner = *event.owner;
    if (!json_payloads_ && json.size() >= 2 && json.front() == '"') {
      std::string_view inner = json.substr(1, json.size() - 2);
      if (inner.find('\\') == std::string_view::npos) {
        // Without an owner the event straddled two reads, in a buffer the next overwrites.
        state.buffer = owner;
        state.payload = owner ? inner : kept_.keep(inner, state.buffer);
        return;
      }
      auto text = std::make_shared<std::string>();
      if (json_unquote(json, *text)) {
        state.payload = *text;
        state.buffer = std::move(text);
        return;
      }
    }
    if (owner) {
      state.buffer = owner;
      state.payload = json;
      return;
    }
    state.payload = kept_.keep(json, state.buffer);
  }

  // Why a publish was refused; over max_queued_bytes, with the limit and what was queued.
  std::string refusal(std::error_code ec) const {
    if (ec != make_error_code(client_errc::queue_full)) return "quickio: " + ec.message();
    return "quickio: " + limit_exceeded_text("bytes of events waiting to be written, with this one",
                                             "max_queued_bytes", connection_->max_queued_bytes(),
                                             connection_->machine().refused_at());
  }

  void publish(PublishWork work) {
    std::string& path = publish_path_;
    std::string why;
    if (auto ec = path_of(work.topic, path, why)) return work.done(ec, {}, why);
    // All checked first: a batch with one bad payload sends none.
    for (std::size_t i = 0; i < work.payloads.size(); ++i)
      if (auto ec = check(work.payloads[i], why)) return work.done(ec, {}, why);
    // An event is "<path>:<id>=<json>\n", framed; the JSON is the payload as text escapes it.
    auto over_write_room = [&](std::string_view json) {
      return frame_over_write_room(ctx_.budget(), path.size() + json.size() + 32);
    };
    if (work.payloads.size() > 1)
      for (const auto& payload : work.payloads)
        if (auto text = over_write_room(encode(payload)); !text.empty())
          return work.done(make_error_code(polybus::errc::limit_exceeded), {}, text);
    using JsonIs = detail::Machine::JsonIs;
    if (work.payloads.size() == 1) {
      OpCompletion done = work.done;
      const std::string_view json = encode(work.payloads[0]);
      if (auto text = over_write_room(json); !text.empty())
        return work.done(make_error_code(polybus::errc::limit_exceeded), {}, text);
      auto ec = connection_->machine().send(
          path, json, {}, [done](std::error_code sent) mutable { done(sent); },
          [done] { return done.done(); }, JsonIs::valid);
      if (ec) work.done(ec, {}, refusal(ec));
      return;
    }
    auto remaining = std::make_shared<std::size_t>(work.payloads.size());
    for (std::size_t i = 0; i < work.payloads.size(); ++i) {
      OpCompletion done = work.done;
      auto ec = connection_->machine().send(
          path, encode(work.payloads[i]), {},
          [done, remaining](std::error_code sent) mutable {
            if (sent)
              done(sent);
            else if (--*remaining == 0)
              done({});
          },
          [done] { return done.done(); }, JsonIs::valid);
      if (ec) return work.done(ec, {}, refusal(ec));
    }
  }

  std::uint64_t listen(const std::string& path, const std::string& topic,
                       std::shared_ptr<SubscriptionSink> sink, bool serving) {
    std::weak_ptr<QuickioBackend> weak = weak_from_this();
    std::weak_ptr<SubscriptionSink> weak_sink = sink;
    auto listener = [weak, weak_sink, serving, topic = std::make_shared<const std::string>(topic)](
                        const detail::Incoming& event) {
      auto self = weak.lock();
      auto target = weak_sink.lock();
      if (!self || !target) return;
      if (serving && event.server_callback == 0) return;  // a request always asks for an answer
      auto state = self->ctx_.make_message(self->weak_from_this());
      state->shared_topic = topic;  // as the application wrote it
      self->decode(event, *state);
      if (serving) {
        state->expects_reply = true;
        state->adapter_token = event.connection;
        state->id.assign_number(event.server_callback);
      }
      target->deliver(Message(std::move(state)));
    };
    auto result = [weak_sink, path](int code, std::string_view err) {
      auto target = weak_sink.lock();
      if (!target) return;
      if (code == 200 || code == 202)
        target->ready({});
      else if (code != -1)  // -1: removed before the answer
        target->ready(make_error_code(polybus::errc::broker_error),
                      "quickio: /qio/on " + path + " refused: " + std::to_string(code) + " " +
                          std::string(err));
    };
    std::uint64_t id = connection_->machine().on(path, listener, false, result);
    sinks_.emplace(id, Sink{path, sink});
    return id;
  }

  void unlisten(const std::string& path, std::uint64_t id) {
    sinks_.erase(id);
    connection_->machine().off(path, id);
  }

  void refused(const std::string& path, int code, const std::string& err) {
    for (auto it = sinks_.begin(); it != sinks_.end();) {
      if (it->second.path != path) {
        ++it;
        continue;
      }
      auto sink = it->second.sink.lock();
      it = sinks_.erase(it);
      if (sink)
        sink->ended(make_error_code(polybus::errc::broker_error),
                    "quickio: /qio/on " + path + " refused: " + std::to_string(code) + " " + err);
    }
  }

  void request(RequestWork work) {
    std::string path, why;
    if (auto ec = path_of(work.topic, path, why)) return work.done(ec, {}, why);
    if (auto ec = check(work.payload, why)) return work.done(ec, {}, why);
    std::string json(encode(work.payload));  // kept: it may wait for the connection to open
    std::weak_ptr<QuickioBackend> weak = weak_from_this();
    OpCompletion done = work.done;
    send_with_callback(
        path, json, done,
        [weak, done](const detail::Answer& answer) mutable {
          const int code = answer.code;
          const std::string_view data = answer.data_json, err = answer.err_msg;
          auto ec = map_callback_code(code, err);
          auto self = weak.lock();
          if (ec) return done(ec, {}, lost_with(self.get(), code, err));
          if (!self) return done(make_error_code(polybus::errc::closed));
          std::string reply(data);
          std::string text;
          if (!self->json_payloads_ && json_unquote(data, text)) reply = std::move(text);
          done({}, std::move(reply));
        },
        true);
  }

  void ping(OpCompletion done) {
    send_with_callback(
        "/qio/ping", "null", done,
        [weak = weak_from_this(), done](const detail::Answer& answer) mutable {
          if (answer.code == 200) return done({});
          auto self = weak.lock();
          done(map_callback_code(answer.code, answer.err_msg), {},
               lost_with(self.get(), answer.code, answer.err_msg));
        },
        false);
  }

  // A callback's error text; for one lost with its connection (-1), how that connection ended.
  static std::string lost_with(const QuickioBackend* self, int code, std::string_view err) {
    if (code != -1 || !self || self->connection_->last_end().empty()) return std::string(err);
    return std::string(err) + ": " + self->connection_->last_end();
  }

  void close() {
    awaiting_open_.clear();  // the core fails their operations with errc::closed
    awaiting_requests_ = 0;
    ctx_.waiting_requests(0);
    connection_->close();
  }

  // MessageBackend: only serve() messages are answered; QuickIO has no acknowledgements.
  void ack(polybus::detail::MessageState&) override {}
  void nack(polybus::detail::MessageState&, std::chrono::milliseconds) override {}
  void touch(polybus::detail::MessageState&) override {}
  void reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
             std::string detail) override {
    std::uint64_t callback_id = 0;  // the adapter's own decimal, set at delivery
    const std::string_view id = message.id.view();
    std::from_chars(id.data(), id.data() + id.size(), callback_id);
    std::string why;
    std::error_code answered;
    if (ec) {
      answered =
          connection_->machine().answer(message.adapter_token, callback_id, kHandlerFailedCode,
                                        "null", std::string(kHandlerFailedPrefix) + detail);
    } else if (check(payload, why)) {
      answered =
          connection_->machine().answer(message.adapter_token, callback_id, kHandlerFailedCode,
                                        "null", std::string(kHandlerFailedPrefix) + why);
    } else {
      answered =
          connection_->machine().answer(message.adapter_token, callback_id, 200, encode(payload));
    }
    if (answered)
      ctx_.log(LogLevel::warn,
               "quickio: reply to " + message.topic_name() + " not sent: " + answered.message());
  }

 private:
  struct Sink {
    std::string path;
    std::weak_ptr<SubscriptionSink> sink;
  };
  AdapterContext ctx_;
  bool json_payloads_;
  mutable KeptCopies kept_;  // events that straddled two reads (decode(), on the strand)
  std::string scratch_;  // a text payload's JSON string, on its way into an event (the strand's)
  std::string publish_path_;  // a publish's event path, on its way into an event (the same)
  std::shared_ptr<detail::Connection> connection_;
  std::map<std::uint64_t, Sink> sinks_;
  std::vector<std::function<void()>> awaiting_open_;
  std::size_t awaiting_requests_ = 0;  // of awaiting_open_, the requests (for the metrics)
};

class QuickioSubscription : public AdapterSubscription {
 public:
  QuickioSubscription(std::shared_ptr<QuickioBackend> backend, std::string path,
                      const std::string& topic, std::shared_ptr<detail::PausableSink> sink,
                      bool serving)
      : backend_(std::move(backend)), path_(std::move(path)), sink_(std::move(sink)) {
    id_ = backend_->listen(path_, topic, sink_, serving);
  }
  void unsubscribe(OpCompletion done) override {
    if (!unsubscribed_) backend_->unlisten(path_, id_);
    unsubscribed_ = true;
    done({});
  }
  // No flow control in QuickIO: the subscription stays on the server and its events are held
  // by the client until resume (see PausableSink).
  void pause() override { sink_->pause(); }
  void resume() override { sink_->resume(); }
  void set_max_in_flight(std::uint32_t) override {}  // no credit in QuickIO; TCP paces delivery

 private:
  std::shared_ptr<QuickioBackend> backend_;
  std::string path_;
  std::shared_ptr<detail::PausableSink> sink_;
  std::uint64_t id_ = 0;
  bool unsubscribed_ = false;
};

class QuickioAdapter : public Adapter {
 public:
  explicit QuickioAdapter(AdapterContext& context)
      : context_(context), backend_(std::make_shared<QuickioBackend>(context)) {
    backend_->start();
  }
  Capabilities capabilities() const override { return quickio_capabilities(); }
  void publish(PublishWork work) override { backend_->publish(std::move(work)); }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec& spec,
                                                 std::shared_ptr<SubscriptionSink> sink) override {
    return make(spec.topic, std::move(sink), false);
  }
  std::shared_ptr<AdapterSubscription> serve(const ServeSpec& spec,
                                             std::shared_ptr<SubscriptionSink> sink) override {
    return make(spec.topic, std::move(sink), true);
  }
  void request(RequestWork work) override { backend_->request(std::move(work)); }
  void ping(OpCompletion done) override { backend_->ping(std::move(done)); }
  void close(Clock::time_point, std::function<void()> done) override {
    backend_->close();
    done();
  }

 private:
  std::shared_ptr<AdapterSubscription> make(const std::string& topic,
                                            std::shared_ptr<SubscriptionSink> sink, bool serving) {
    std::string path, why;
    if (auto ec = backend_->path_of(topic, path, why)) throw Error(ec, why);
    auto pausable = std::make_shared<detail::PausableSink>(
        std::move(sink), static_cast<std::size_t>(context_.options().get_int("max_held_bytes")),
        context_, path);
    return std::make_shared<QuickioSubscription>(backend_, path, topic, std::move(pausable),
                                                 serving);
  }

  AdapterContext context_;
  std::shared_ptr<QuickioBackend> backend_;
};

}  // namespace

void register_scheme() {
  static const char* const kSummaries[][2] = {
      {"quickio", "QuickIO over raw TCP: events to paths, callbacks for request/reply"},
      {"quickio+ws", "QuickIO over WebSocket, falling back to HTTP long polling"},
      {"quickio+http", "QuickIO over HTTP long polling"},
  };
  for (const auto& [scheme, summary] : kSummaries) {
    SchemeInfo info;
    info.scheme = scheme;
    info.summary = summary;
    info.options = detail::option_table();
    info.capabilities = quickio_capabilities();
    info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
      return std::make_unique<QuickioAdapter>(context);
    };
    polybus::register_scheme(std::move(info));
  }
}

}  // namespace polybus::quickio
