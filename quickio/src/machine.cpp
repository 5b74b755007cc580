// SPDX-License-Identifier: Apache-2.0
#include "machine.hpp"

#include <algorithm>

#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/text/text.hpp"

namespace polybus::quickio::detail {
namespace {

constexpr std::string_view kHeartbeat = "/qio/heartbeat";
constexpr std::string_view kMove = "/qio/move";

bool accepted(int code) {
  return code == 200 || code == 202;
}  // 202: subscription pending

}  // namespace

bool Machine::is_local_path(std::string_view path) {
  return path == "/open" || path == "/close" || path == "/error" || path.substr(0, 5) == "/qio/";
}

void Machine::opened() {
  open_ = true;
  opened_once_since_close_ = true;
  ++connection_;
  next_callback_id_ = 1;
  heartbeat_answer_unsent_ = std::make_shared<bool>(false);  // the old link's answer is void
  // The document's order: old callbacks fail (none are left: closed() did it), subscriptions,
  // the queue, then /open.
  fail_callbacks("disconnected");
  std::vector<std::string> subscribed;
  for (auto& [path, entry] : paths_)
    if (!entry.listeners.empty() && !is_local_path(path)) subscribed.push_back(path);
  for (const auto& path : subscribed) subscribe(path);
  flush_queue();
  emit_local("/open", "null");
}

void Machine::flush_queue() {
  if (queue_.empty()) return;
  while (open_ && !queue_.empty() && handler_.write_room()) {
    Queued item = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= std::min(queued_bytes_, item.text.size());
    if (item.expired && item.expired()) {
      if (item.sent) item.sent(make_error_code(polybus::errc::timeout));
      continue;
    }
    write(item.text, std::move(item.sent), std::move(item.expired));
  }
  handler_.queue_changed();
}

void Machine::closed() {
  if (!open_) return;
  open_ = false;
  for (auto& [path, entry] : paths_) entry.confirmed = false;
  fail_callbacks("disconnected");
  if (opened_once_since_close_) {
    opened_once_since_close_ = false;
    emit_local("/close", "null");
  }
}

void Machine::shut_down() {
  bool was_open = open_;
  open_ = false;
  fail_callbacks("closed");
  auto queue = std::move(queue_);
  queue_.clear();
  queued_bytes_ = 0;
  handler_.queue_changed();
  for (auto& item : queue)
    if (item.sent) item.sent(make_error_code(polybus::errc::closed));
  if (was_open && opened_once_since_close_) {
    opened_once_since_close_ = false;
    emit_local("/close", "null");
  }
  auto paths = std::move(paths_);
  paths_.clear();
  for (auto& [path, entry] : paths) finish_results(entry, -1, "closed");
}

std::error_code Machine::receive(std::string_view text, const std::shared_ptr<const void>& owner,
                                 std::string* why) {
  Event event;
  if (auto ec = parse_event(text, event, why, limits_.max_json_depth)) return ec;
  if (event.path.substr(0, kCallbackPrefix.size()) == kCallbackPrefix) {
    auto id = callback_path_id(event.path);
    if (!id) {
      if (why) *why = "callback path '" + std::string(event.path) + "' has no valid id";
      return make_error_code(codec_errc::invalid_path);
    }
    auto it = callbacks_.find(*id);
    if (it == callbacks_.end()) return {};  // not ours (any more): nothing waits for it
    CallbackBody body;
    if (auto ec = parse_callback_body(event.json, body, why, limits_.max_json_depth)) return ec;
    CallbackFn fn = std::move(it->second);
    callbacks_.erase(it);
    if (fn) fn(Answer{body.code, body.data_json, body.err_msg, event.callback_id, connection_});
    return {};
  }
  if (event.path == kMove) {
    std::string address;
    if (!json_unquote(event.json, address) || address.empty()) {
      if (why) *why = "/qio/move data is not a non-empty JSON string: " + std::string(event.json);
      return make_error_code(codec_errc::invalid_json);
    }
    handler_.move_to(address);
    return {};
  }
  if (event.path == kHeartbeat && event.callback_id != 0 && !*heartbeat_answer_unsent_) {
    // The server closes if we do not answer. One answer waits to be written at a time: a flood
    // of heartbeats costs one queued answer, not one per heartbeat.
    *heartbeat_answer_unsent_ = true;
    write(make_event(callback_path(event.callback_id), 0, make_callback_body(200, "null")),
          [unsent = heartbeat_answer_unsent_](std::error_code) { *unsent = false; });
  }
  Incoming incoming{event.path, event.json, event.callback_id, connection_, &owner};
  deliver(event.path, incoming);  // a view: no string made per event
  return {};
}

bool Machine::over_unsent_bound(std::size_t bytes) {
  if (handler_.unsent_bytes() + bytes <= limits_.max_queued_bytes) return false;
  refused_at_ = handler_.unsent_bytes() + bytes;
  return true;
}

std::error_code Machine::send(std::string_view path, std::string_view json, CallbackFn callback,
                              SentFn sent, ExpiredFn expired, JsonIs json_is) {
  if (json_is != JsonIs::valid && !is_valid_json(json))
    return make_error_code(polybus::errc::invalid_argument);
  // In valid JSON a line break can only be whitespace between tokens (inside strings it must be
  // escaped); HTTP long polling separates events by '\n', so it becomes a space.
  std::string flattened;
  if (json.find('\n') != std::string_view::npos || json.find('\r') != std::string_view::npos) {
    flattened.assign(json);
    std::replace_if(
        flattened.begin(), flattened.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    json = flattened;
  }
  std::string cleaned;  // only when the path needs cleaning: most already are clean
  std::string_view clean = path;
  if (!is_clean_path(path)) {
    cleaned = clean_path(path);
    clean = cleaned;
  }
  if (callback) {
    if (!open_) {
      // Rule 1 of queued events: callbacks are never queued; they fail at once.
      if (sent) sent(make_error_code(polybus::errc::disconnected));
      callback(Answer{-1, "null", "disconnected"});
      return {};
    }
    const std::uint64_t id = next_callback_id_;
    const std::string text = make_event(clean, id, json);
    // Bounded as events are: a caller faster than the connection would otherwise grow the
    // unsent bytes toward max_write_buffer, and a burst of them at open past it.
    if (over_unsent_bound(text.size())) return make_error_code(client_errc::queue_full);
    ++next_callback_id_;
    callbacks_.emplace(id, std::move(callback));
    write(text, std::move(sent));
    return {};
  }
  // Built in a buffer the machine keeps: the link copies it (or writes it) at once.
  std::string& text = event_scratch_;
  text.clear();
  append_event(text, clean, 0, json);
  if (open_ && queue_.empty() && handler_.write_room()) {
    // A publisher faster than the connection would otherwise grow the unsent bytes without end.
    if (over_unsent_bound(text.size())) return make_error_code(client_errc::queue_full);
    write(text, std::move(sent), std::move(expired));
    return {};
  }
  if (queued_bytes_ + text.size() > limits_.max_queued_bytes) {
    refused_at_ = queued_bytes_ + text.size();
    return make_error_code(client_errc::queue_full);
  }
  queued_bytes_ += text.size();
  queue_.push_back({text, std::move(sent), std::move(expired)});
  handler_.queue_changed();
  return {};
}

void Machine::requeue(std::vector<Queued> unsent) {
  std::deque<Queued> front;
  std::size_t bytes = 0;
  for (auto& item : unsent) {
    Event event;
    const bool callback =  // never queued (rule 1); the machine made the text, so it parses
        parse_event(item.text, event, nullptr, limits_.max_json_depth) || event.callback_id != 0;
    if (open_ || callback || queued_bytes_ + bytes + item.text.size() > limits_.max_queued_bytes) {
      if (item.sent) item.sent(make_error_code(polybus::errc::disconnected));
      continue;
    }
    bytes += item.text.size();
    front.push_back(std::move(item));
  }
  if (front.empty()) return;
  queue_.insert(queue_.begin(), std::make_move_iterator(front.begin()),
                std::make_move_iterator(front.end()));
  queued_bytes_ += bytes;
  handler_.queue_changed();
}

std::error_code Machine::answer(std::uint64_t connection, std::uint64_t callback_id, int code,
                                std::string_view data_json, std::string_view err_msg) {
  if (!open_ || connection != connection_) return make_error_code(polybus::errc::disconnected);
  if (callback_id == 0) return make_error_code(polybus::errc::invalid_argument);
  if (!data_json.empty() && !is_valid_json(data_json))
    return make_error_code(polybus::errc::invalid_argument);
  write(make_event(callback_path(callback_id), 0, make_callback_body(code, data_json, err_msg)));
  return {};
}

std::uint64_t Machine::on(std::string_view path, ListenerFn listener, bool once,
                          SubscribeResultFn result, std::uint64_t id) {
  std::string clean = clean_path(path);
  auto& entry = paths_[clean];
  bool first = entry.listeners.empty();
  if (id == 0) id = next_listener_id_++;
  bool settled = is_local_path(clean) || entry.confirmed;
  entry.listeners.push_back({id, std::make_shared<const ListenerFn>(std::move(listener)), once,
                             settled ? nullptr : std::move(result)});
  if (first && open_ && !is_local_path(clean)) subscribe(clean);
  if (settled && result) result(200, "");
  return id;
}

void Machine::off(std::string_view path) {
  std::string clean = clean_path(path);
  auto it = paths_.find(clean);
  if (it == paths_.end()) return;
  PathEntry entry = std::move(it->second);
  paths_.erase(it);
  if (open_ && !is_local_path(clean)) unsubscribe(clean);
  finish_results(entry, -1, "closed");
}

void Machine::off(std::string_view path, std::uint64_t listener_id) {
  std::string clean = clean_path(path);
  auto it = paths_.find(clean);
  if (it == paths_.end()) return;
  auto& listeners = it->second.listeners;
  SubscribeResultFn result;
  for (auto l = listeners.begin(); l != listeners.end(); ++l) {
    if (l->id != listener_id) continue;
    result = std::move(l->result);
    listeners.erase(l);
    break;
  }
  if (listeners.empty()) {
    paths_.erase(it);
    if (open_ && !is_local_path(clean)) unsubscribe(clean);
  }
  if (result) result(-1, "closed");
}

void Machine::emit_local(std::string_view path, std::string_view json) {
  static const std::shared_ptr<const void> none;
  Incoming incoming{path, json, 0, connection_, &none};
  deliver(path, incoming);
}

bool Machine::has_listeners(std::string_view path) const {
  auto it = paths_.find(path);
  return it != paths_.end() && !it->second.listeners.empty();
}

void Machine::write(std::string_view text, SentFn sent, ExpiredFn expired) {
  handler_.send(text, std::move(sent), std::move(expired));
}

void Machine::subscribe(const std::string& path) {
  auto& entry = paths_[path];
  const std::uint64_t epoch = entry.epoch = next_epoch_++;
  std::uint64_t id = next_callback_id_++;
  callbacks_.emplace(id, [this, path, epoch](const Answer& answer) {
    on_subscribe_answer(path, epoch, answer.code, answer.err_msg);
  });
  write(make_event("/qio/on", id, text::json_quote(path)));
}

void Machine::unsubscribe(const std::string& path) {
  write(make_event("/qio/off", 0, text::json_quote(path)));
}

void Machine::on_subscribe_answer(const std::string& path, std::uint64_t epoch, int code,
                                  std::string_view err_msg) {
  if (code == -1) return;  // the connection went: subscribed again on the next one
  auto it = paths_.find(path);
  if (it == paths_.end() || it->second.epoch != epoch) return;  // removed (or renewed) since
  if (accepted(code)) {
    it->second.confirmed = true;
    finish_results(it->second, code, err_msg);
    return;
  }
  PathEntry entry = std::move(it->second);
  paths_.erase(it);
  std::string message(err_msg);
  finish_results(entry, code, message);
  handler_.subscription_refused(path, code, message);
}

void Machine::fail_callbacks(std::string_view why) {
  // Swapped out first: a callback may send again, and its new callback must not be failed here.
  auto callbacks = std::move(callbacks_);
  callbacks_.clear();
  for (auto& [id, fn] : callbacks)
    if (fn) fn(Answer{-1, "null", why});
}

void Machine::deliver(std::string_view path, const Incoming& event) {
  auto it = paths_.find(path);
  if (it == paths_.end()) return;
  // Held first: a listener may call on/off. One-shot listeners are removed before they run.
  // One listener (a subscription's) needs no list.
  auto& listeners = it->second.listeners;
  const bool one = listeners.size() == 1;
  std::shared_ptr<const ListenerFn> only;
  std::vector<std::shared_ptr<const ListenerFn>> several;
  if (one)
    only = listeners.front().fn;
  else
    several.reserve(listeners.size());
  for (auto l = listeners.begin(); l != listeners.end();) {
    if (!one) several.push_back(l->fn);
    if (l->once)
      l = listeners.erase(l);
    else
      ++l;
  }
  if (listeners.empty()) {
    paths_.erase(it);
    if (open_ && !is_local_path(path)) unsubscribe(std::string(path));
  }
  if (only && *only) (*only)(event);
  for (auto& fn : several)
    if (*fn) (*fn)(event);
}

void Machine::finish_results(PathEntry& entry, int code, std::string_view err_msg) {
  for (auto& listener : entry.listeners) {
    if (!listener.result) continue;
    auto result = std::move(listener.result);
    listener.result = nullptr;
    result(code, err_msg);
  }
}

}  // namespace polybus::quickio::detail
