// SPDX-License-Identifier: Apache-2.0
// QuickIO's client session (quickio/src/machine.*) over the raw TCP wire
// (raw_wire.*), both sans I/O, driven as the connection drives them: a connection is a RawWire
// whose handshake opens the session; received frames go to Machine::receive; an error drops
// the connection. An operation stream mixes raw server bytes, well-formed server events
// (callback answers, /qio/move, heartbeats, events for listened paths) and every client call;
// listeners and callbacks call back into the session as they are allowed to. Input: byte 0
// picks max_queued_bytes and max_frame_size, then operations (see the switch). Checks: every
// callback and every SentFn of an accepted send runs exactly once by shut_down(); subscribe
// results at most once; what the session writes are valid events; queued bytes stay bounded.
#include <memory>

#include "fuzz_util.hpp"
#include "machine.hpp"
#include "polybus/error.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "rapidjson_known.hpp"
#include "raw_wire.hpp"

using namespace polybus::quickio;
using namespace polybus::quickio::detail;
using polybus::fuzz::ByteReader;

namespace {

const char* const kPaths[] = {"/a",     "/b/c",           "a//b/",   "/open", "/close",
                              "/error", "/qio/heartbeat", "/qio/on", "",      "/x-y_z"};
const char* const kJson[] = {"null", "1", "\"s\"", "{\"a\":[1,2]}", "[\n1\r]", "", "{", "nul"};
const char* const kBodies[] = {"{\"code\":200,\"data\":null}",
                               "{\"code\":202}",
                               "{\"code\":500,\"data\":1,\"err_msg\":\"no\"}",
                               "{\"code\":\"x\"}",
                               "[]",
                               "{\"code\":200,\"data\":{\"k\":[true]},\"err_msg\":\"\"}"};

struct Tracker {
  std::vector<int> callbacks;  // calls per CallbackFn
  std::vector<int> sent;       // calls per SentFn; -1: its send was refused, never called
  std::vector<int> results;    // calls per SubscribeResultFn
  std::vector<std::pair<std::string, std::uint64_t>> listeners;
};

struct Harness : MachineHandler {
  Tracker t;
  std::unique_ptr<Machine> session;
  std::unique_ptr<RawWire> wire;
  struct WireEvents : WireHandler {
    Harness* h = nullptr;
    std::string why;
    std::error_code error;
    void on_wire_open() override { h->session->opened(); }
    void on_wire_event(std::string_view text, const std::shared_ptr<const void>& owner) override {
      if (error) return;
      h->infinite_number = polybus::fuzz::rapidjson_reads_infinity(text.substr(
          std::min(text.size(),
                   text.find('=') == std::string_view::npos ? text.size() : text.find('=') + 1)));
      error = h->session->receive(text, owner, &why);
      h->infinite_number = false;
      if (error) FUZZ_CHECK(!why.empty());
    }
  } events;
  std::size_t max_frame = 1 << 20;
  std::size_t pending_unsent = 0;
  // What the machine sent and the "socket" has not written yet.
  std::deque<std::pair<std::string, SentFn>> out;
  void send(std::string_view text, SentFn sent, ExpiredFn) override {
    FUZZ_CHECK(session->is_open());  // the machine sends only on an open connection
    out.emplace_back(std::string(text), std::move(sent));
  }
  int depth = 0;                 // re-entry from listeners and callbacks
  bool infinite_number = false;  // the event being received holds known finding 5

  void move_to(const std::string& address) override { FUZZ_CHECK(!address.empty()); }
  void subscription_refused(const std::string& path, int code, const std::string&) override {
    FUZZ_CHECK(!path.empty());
    FUZZ_CHECK(code != 200 && code != 202 && code != -1);
  }
  std::size_t unsent_bytes() const override { return pending_unsent; }

  SentFn make_sent(std::size_t& index) {
    index = t.sent.size();
    t.sent.push_back(0);
    return [this, index](std::error_code) { ++t.sent[index]; };
  }

  CallbackFn make_callback(std::uint8_t behaviour) {
    std::size_t index = t.callbacks.size();
    t.callbacks.push_back(0);
    return [this, index, behaviour](const polybus::quickio::detail::Answer& answer) {
      const int code = answer.code;
      const std::string_view data_json = answer.data_json, err = answer.err_msg;
      ++t.callbacks[index];
      polybus::fuzz::touch(data_json);
      polybus::fuzz::touch(err);
      // Known finding 1: a lone low-surrogate escape in the answer's data is not valid JSON again.
      // Known finding 5: a number read as infinity leaves data_json truncated.
      if (code != -1 && (polybus::fuzz::known_findings() ||
                         (!polybus::fuzz::has_encoded_surrogate(data_json) && !infinite_number)))
        FUZZ_CHECK(is_valid_json(data_json));
      // "a callback may send again"
      if ((behaviour & 1) && depth < 3) {
        ++depth;
        send("/again", "1", behaviour >> 1);
        --depth;
      }
    };
  }

  ListenerFn make_listener(std::uint8_t behaviour, std::string path) {
    return [this, behaviour, path](const Incoming& e) {
      FUZZ_CHECK(e.owner != nullptr);
      polybus::fuzz::touch(e.json);
      polybus::fuzz::touch(e.path);
      if (depth >= 3) return;
      ++depth;
      // "a listener may call on/off"
      switch (behaviour % 5) {
        case 1:
          session->off(path);
          break;
        case 2:
          listen(kPaths[behaviour % 10], 0, behaviour >> 3 & 1);
          break;
        case 3:
          send(path, "2", 0);
          break;
        case 4:
          if (e.server_callback) session->answer(e.connection, e.server_callback, 200, "null");
          break;
        default:
          break;
      }
      --depth;
    };
  }

  void send(std::string_view path, std::string_view json, std::uint8_t how) {
    CallbackFn cb;
    if (how & 1) cb = make_callback(how >> 1);
    std::size_t sent_index = 0;
    SentFn sent;
    if (how & 2) sent = make_sent(sent_index);
    ExpiredFn expired;
    if (how & 4) expired = [expire = (how & 8) != 0] { return expire; };
    const bool had_cb = static_cast<bool>(cb);
    const std::size_t cb_index = t.callbacks.size() - 1;
    auto ec = session->send(path, json, std::move(cb), std::move(sent), std::move(expired));
    // A request is refused for invalid JSON, or past max_queued_bytes of unsent bytes (queue_full).
    FUZZ_CHECK(!had_cb || ec == make_error_code(client_errc::queue_full) ||
               static_cast<bool>(ec) == !is_valid_json(json));
    if (ec) {
      if (how & 2) t.sent[sent_index] = -1;
      if (had_cb) t.callbacks[cb_index] = -1;
    }
  }

  void listen(std::string_view path, std::uint8_t behaviour, bool once) {
    std::size_t index = t.results.size();
    t.results.push_back(0);
    auto result = [this, index](int, std::string_view err) {
      ++t.results[index];
      polybus::fuzz::touch(err);
    };
    std::uint64_t id = session->on(path, make_listener(behaviour, std::string(path)), once, result);
    t.listeners.emplace_back(std::string(path), id);
  }

  void connect() {
    if (wire) drop();
    events.h = this;
    events.error = {};
    wire = std::make_unique<RawWire>(max_frame, events);
    wire->start();
    FUZZ_CHECK(wire->output() == kHandshake);
    wire->output().clear();
  }

  void drop() {
    wire.reset();
    // The link fails what it never wrote, as a real one does.
    auto unwritten = std::move(out);
    out.clear();
    for (auto& [text, sent] : unwritten)
      if (sent) sent(make_error_code(polybus::errc::disconnected));
    session->closed();
    FUZZ_CHECK(!session->is_open());
  }

  void server_bytes(std::string bytes) {
    if (!wire) return;
    auto owner = std::make_shared<std::string>(std::move(bytes));
    std::string why;
    auto ec = wire->receive(owner, *owner, why);
    if (ec) FUZZ_CHECK(!why.empty());
    if (ec || events.error) drop();
  }

  void write_out(bool all) {
    while (!out.empty()) {
      Event event;
      FUZZ_CHECK(!parse_event(out.front().first, event));
      if (wire) wire->send(out.front().first);
      auto sent = std::move(out.front().second);
      out.pop_front();
      if (sent) sent({});
      if (!all) break;
    }
    if (wire) wire->output().clear();
  }
};

std::string server_event(ByteReader& in, Harness& h) {
  switch (in.u8() % 6) {
    case 0: {  // the answer to a callback the client asked for (ids count from 1)
      std::uint64_t id = in.u8() % 8 + 1;
      std::string body = in.flag() ? kBodies[in.u8() % 6] : std::string(in.short_bytes());
      return make_event(callback_path(id), 0, body);
    }
    case 1:
      return make_event("/qio/move", 0, in.flag() ? "\"other:1\"" : std::string(in.short_bytes()));
    case 2:
      return make_event("/qio/heartbeat", in.u8() % 3, "null");
    case 3:
      return make_event(clean_path(kPaths[in.u8() % 10]), in.u8() % 3, kJson[in.u8() % 5]);
    case 4: {
      if (h.t.listeners.empty()) return "/a:0=null";
      const auto& l = h.t.listeners[in.u8() % h.t.listeners.size()];
      return make_event(clean_path(l.first), in.u8() % 3, "[1]");
    }
    default:
      return std::string(in.short_bytes());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t config = in.u8();
  Harness h;
  MachineLimits limits;
  limits.max_queued_bytes = (config & 1) ? 64 : (config & 2) ? 4096 : 8 << 20;
  h.max_frame = (config & 4) ? 32 : 1 << 20;
  h.session = std::make_unique<Machine>(limits, h);

  bool shut = false;
  while (!in.empty() && !shut) {
    switch (in.u8() % 14) {
      case 0:
        h.connect();
        break;
      case 1:  // the server's handshake, possibly split
        if (h.wire) {
          std::size_t cut = in.u8() % 10;
          h.server_bytes(std::string(kHandshake.substr(0, cut)));
          h.server_bytes(std::string(kHandshake.substr(cut)));
        }
        break;
      case 2:
        if (h.wire) h.drop();
        break;
      case 3: {
        std::string path = in.flag() ? kPaths[in.u8() % 10] : std::string(in.short_bytes());
        std::string json = in.flag() ? kJson[in.u8() % 8] : std::string(in.short_bytes());
        h.send(path, json, in.u8());
        break;
      }
      case 4: {
        std::uint64_t connection = h.session->connection() - (in.u8() % 2);
        h.session->answer(connection, in.u8() % 4, static_cast<int>(in.u16()) - 100,
                          kJson[in.u8() % 8], in.flag() ? "err" : "");
        break;
      }
      case 5:
        h.listen(kPaths[in.u8() % 10], in.u8(), in.flag());
        break;
      case 6:
        if (in.flag()) {
          h.session->off(kPaths[in.u8() % 10]);
        } else if (!h.t.listeners.empty()) {
          const auto& l = h.t.listeners[in.u8() % h.t.listeners.size()];
          h.session->off(l.first, l.second);
        }
        break;
      case 7:
        h.session->emit_local(kPaths[in.u8() % 10], "null");
        break;
      case 8:
      case 9: {  // server events, each in a raw frame
        std::string bytes;
        for (std::uint8_t n = in.u8() % 3 + 1; n > 0; --n)
          append_raw_frame(bytes, server_event(in, h));
        h.server_bytes(std::move(bytes));
        break;
      }
      case 10:  // raw server bytes
        h.server_bytes(std::string(in.bytes(std::size_t{in.u8()} + 1)));
        break;
      case 11:
        h.write_out(in.flag());
        break;
      case 12:
        h.pending_unsent = in.flag() ? 0 : in.u16();
        break;
      case 13:
        if (in.u8() == 0) shut = true;
        break;
    }
    FUZZ_CHECK(h.session->queued_bytes() <= limits.max_queued_bytes);
  }
  h.write_out(true);
  h.session->shut_down();
  FUZZ_CHECK(h.out.empty());
  FUZZ_CHECK(h.session->pending_callbacks() == 0);
  for (int c : h.t.callbacks) FUZZ_CHECK(c == 1 || c == -1);
  for (int s : h.t.sent) FUZZ_CHECK(s == 1 || s == -1);
  for (int r : h.t.results) FUZZ_CHECK(r <= 1);
  return 0;
}
