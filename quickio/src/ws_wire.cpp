// SPDX-License-Identifier: Apache-2.0
#include "ws_wire.hpp"

#include <openssl/rand.h>

#include <array>
#include <random>
#include <vector>
#include <websocketpp/client.hpp>
#include <websocketpp/config/core_client.hpp>

#include "http_exchange.hpp"
#include "polybus/adapter/budget.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "websocketpp_statics.hpp"

namespace polybus::quickio::detail {

using WsEndpoint = websocketpp::client<websocketpp::config::core_client>;

struct WsWire::State {
  WireHandler& handler;
  std::string uri;
  std::size_t max_frame_size;
  WsEndpoint endpoint;
  WsEndpoint::connection_ptr connection;
  std::string output;
  bool upgraded = false;  // 101 with the quickio subprotocol
  bool open = false;      // /qio/ohai answered
  std::string failure;    // why the WebSocket ended; empty while it works
  // Messages received during one read_all, handed on after it returns (websocketpp holds its
  // read lock while it calls the message handler).
  std::vector<WsEndpoint::message_ptr> received;
  // What websocketpp has completed (upgrade answer, messages, pings, pongs), and whether the
  // last read fed bytes that completed nothing: part of a frame is then held.
  std::uint64_t frames = 0;
  bool partial = false;
  bool too_big = false;     // websocketpp refused a message over max_frame_size
  std::string status_line;  // the upgrade answer's first line, checked before websocketpp sees it
  // The upgrade answer's head until its blank line: websocketpp reads exactly that, and frames
  // after it are ours.
  std::string head;
  bool head_done = false;
  // Part of a frame, held across reads (at most a header and max_frame_size).
  std::string pending;
  // websocketpp holds a fragmented message begun: its frames go to websocketpp until it ends.
  bool websocketpp_message = false;
  // Masking keys for the events we frame ourselves, drawn from OpenSSL's generator a batch at
  // a time: websocketpp reads std::random_device once per frame, a system call each.
  std::array<std::uint32_t, 256> masks{};
  std::size_t next_mask = masks.size();

  // A message over max_frame_size: declared by a frame's header (its length known), or refused
  // by websocketpp for a fragmented one (length 0: not known here).
  void refuse_too_big(std::uint64_t length) {
    too_big = true;
    failure = length
                  ? limit_exceeded_text("a WebSocket frame's declared bytes", "max_frame_size",
                                        max_frame_size, length)
                  : "a WebSocket message exceeds max_frame_size=" + std::to_string(max_frame_size);
  }

  // The whole frames at the front of data, in order, until one is incomplete or fails (failure
  // set): the bytes they took. Their events are views of data, kept by owner (null: valid only
  // during the call).
  std::size_t read_frames(std::string_view data, const std::shared_ptr<const void>& owner) {
    std::size_t consumed = 0;
    while (failure.empty()) {
      std::string_view rest = data.substr(consumed);
      WsFrameHead frame;
      if (!read_ws_frame_head(rest, frame)) break;
      if (frame.length > max_frame_size) {
        refuse_too_big(frame.length);
        break;
      }
      if (rest.size() - frame.header < frame.length) break;
      const std::size_t size = frame.header + static_cast<std::size_t>(frame.length);
      consumed += size;
      ++frames;
      if (frame.plain_text() && !websocketpp_message) {
        const std::string_view text = rest.substr(frame.header, size - frame.header);
        if (!take_text(text, owner)) break;
        continue;
      }
      if (frame.opcode == 1 || frame.opcode == 2) websocketpp_message = !frame.fin;
      if (frame.opcode == 0 && frame.fin) websocketpp_message = false;
      const std::size_t used = connection->read_all(rest.data(), size);
      if (frame.opcode == 8 && failure.empty() &&
          connection->get_state() != websocketpp::session::state::open) {
        // The server's close: QuickIO sends nothing after it, so the link ends now (websocketpp's
        // answer, written already, goes first) rather than when the server ends the TCP
        // connection, which a broken server may never do.
        const auto ec = connection->get_ec();
        failure = "the server closed the WebSocket (" +
                  std::to_string(connection->get_remote_close_code()) + " " +
                  connection->get_remote_close_reason() + ")" +
                  (ec ? ", and not validly: " + ec.message() : std::string());
        break;
      }
      auto messages = std::move(received);
      received.clear();
      for (auto& msg : messages) {
        if (msg->get_opcode() != websocketpp::frame::opcode::text) continue;  // QuickIO: text only
        const std::string& text = msg->get_payload();
        // The message keeps its payload.
        if (!take_text(text, std::shared_ptr<const void>(msg, &text))) break;
      }
      if (failure.empty() && used < size) {
        if (connection->get_ec() == websocketpp::processor::error::message_too_big) {
          refuse_too_big(0);
        } else {
          failure = "the WebSocket stopped reading: " + connection->get_ec().message();
        }
      }
    }
    return consumed;
  }

  // A whole text message: /qio/ohai first, events after it. False (with failure set) when the
  // first is not /qio/ohai.
  bool take_text(std::string_view text, const std::shared_ptr<const void>& owner) {
    if (open) {
      handler.on_wire_event(text, owner);
      return true;
    }
    if (text != kHandshake) {
      failure = "the server's first WebSocket message is not /qio/ohai";
      return false;
    }
    open = true;
    handler.on_wire_open();
    return true;
  }

  std::uint32_t mask_key() {
    if (next_mask == masks.size()) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(masks.data()),
                     static_cast<int>(sizeof masks)) != 1) {
        std::random_device device;
        for (auto& key : masks) key = device();
      }
      next_mask = 0;
    }
    return masks[next_mask++];
  }

  State(WireHandler& h, std::string u, std::size_t max)
      : handler(h), uri(std::move(u)), max_frame_size(max) {}
};

WsWire::WsWire(std::string host_port, std::string path, std::size_t max_frame_size,
               WireHandler& handler)
    : state_(std::make_unique<State>(handler, "ws://" + host_port + (path.empty() ? "/" : path),
                                     max_frame_size)) {
  state_->endpoint.clear_access_channels(websocketpp::log::alevel::all);
  state_->endpoint.clear_error_channels(websocketpp::log::elevel::all);
}

WsWire::~WsWire() {
  if (state_->connection) {
    state_->connection->set_write_handler(nullptr);
    state_->connection->set_open_handler(nullptr);
    state_->connection->set_fail_handler(nullptr);
    state_->connection->set_close_handler(nullptr);
    state_->connection->set_message_handler(nullptr);
    state_->connection->set_ping_handler(nullptr);
    state_->connection->set_pong_handler(nullptr);
    // A read still waiting (an upgrade answer cut short) holds the connection through its own
    // handler: end it, or the connection keeps itself alive forever.
    state_->connection->fatal_error();
  }
}

void WsWire::start() {
  State& s = *state_;
  websocketpp::lib::error_code ec;
  s.connection = s.endpoint.get_connection(s.uri, ec);
  if (ec) {
    s.failure = "WebSocket URI " + s.uri + ": " + ec.message();
    return;
  }
  s.connection->add_subprotocol("quickio", ec);
  s.connection->set_max_message_size(s.max_frame_size);
  State* raw = &s;
  s.connection->set_write_handler(
      [raw](websocketpp::connection_hdl, const char* data, std::size_t n) {
        raw->output.append(data, n);
        return websocketpp::lib::error_code();
      });
  s.connection->set_open_handler([raw](websocketpp::connection_hdl) {
    ++raw->frames;
    // websocketpp's client does not record the server's choice: read the header itself.
    if (raw->connection->get_response_header("Sec-WebSocket-Protocol") != "quickio") {
      raw->failure = "the WebSocket upgrade did not select the quickio subprotocol";
      return;
    }
    raw->upgraded = true;
    raw->connection->send(kHandshake.data(), kHandshake.size(), websocketpp::frame::opcode::text);
  });
  s.connection->set_fail_handler([raw](websocketpp::connection_hdl) {
    ++raw->frames;
    auto response = raw->connection->get_response_code();
    raw->failure = "WebSocket upgrade failed (HTTP " + std::to_string(static_cast<int>(response)) +
                   "): " + raw->connection->get_ec().message();
  });
  s.connection->set_close_handler([raw](websocketpp::connection_hdl) {
    if (raw->failure.empty() &&
        (raw->connection->get_ec() == websocketpp::processor::error::message_too_big ||
         raw->connection->get_local_close_code() == websocketpp::close::status::message_too_big))
      raw->refuse_too_big(0);
    if (raw->failure.empty())
      raw->failure = "the server closed the WebSocket (" +
                     std::to_string(raw->connection->get_remote_close_code()) + " " +
                     raw->connection->get_remote_close_reason() + ")";
  });
  s.connection->set_message_handler(
      [raw](websocketpp::connection_hdl, WsEndpoint::message_ptr msg) {
        ++raw->frames;
        raw->received.push_back(std::move(msg));
      });
  s.connection->set_ping_handler([raw](websocketpp::connection_hdl, std::string) {
    ++raw->frames;
    return true;  // websocketpp answers with a pong
  });
  s.connection->set_pong_handler(
      [raw](websocketpp::connection_hdl, std::string) { ++raw->frames; });
  s.endpoint.connect(s.connection);
}

namespace {

constexpr std::size_t kMaxUpgradeHead = 16 * 1024;

}  // namespace

std::error_code WsWire::receive(const std::shared_ptr<const void>& owner, std::string_view bytes,
                                std::string& why) {
  State& s = *state_;
  const auto failed = [&]() -> std::error_code {
    why = s.failure;
    if (s.too_big) return make_error_code(codec_errc::frame_too_large);
    return s.open ? make_error_code(codec_errc::malformed_frame)
                  : make_error_code(client_errc::handshake_refused);
  };
  if (!s.connection || !s.failure.empty()) {
    why = s.failure;
    return make_error_code(client_errc::handshake_refused);
  }
  if (!s.head_done) {
    if (!bytes.empty() && (s.status_line.empty() || s.status_line.back() != '\n')) {
      const std::size_t newline = bytes.find('\n');
      s.status_line.append(
          bytes.substr(0, newline == std::string_view::npos ? bytes.size() : newline + 1));
      const bool complete = s.status_line.back() == '\n';
      if ((complete && http_status_of(s.status_line) < 0) ||
          (!complete && s.status_line.size() > 8 * 1024)) {
        s.failure = "the WebSocket upgrade answer has no HTTP status from 100 to 511: " +
                    s.status_line.substr(0, 64);
        why = s.failure;
        return make_error_code(client_errc::handshake_refused);
      }
    }
    // websocketpp is given the head only, up to its blank line.
    const std::size_t had = s.head.size();
    s.head.append(bytes.substr(0, std::min(bytes.size(), kMaxUpgradeHead + 4 - had)));
    const std::size_t end = s.head.find("\r\n\r\n", had >= 3 ? had - 3 : 0);
    const std::size_t take = end == std::string::npos ? s.head.size() - had : end + 4 - had;
    if (end == std::string::npos && s.head.size() > kMaxUpgradeHead) {
      s.failure = "the WebSocket upgrade answer's head is over " + std::to_string(kMaxUpgradeHead) +
                  " bytes";
      return failed();
    }
    const std::uint64_t frames_before = s.frames;
    const std::size_t used = s.connection->read_all(bytes.data(), take);
    s.partial = s.frames == frames_before;
    if (s.failure.empty() && used < take)
      s.failure =
          "the WebSocket upgrade answer could not be read: " + s.connection->get_ec().message();
    if (!s.failure.empty()) return failed();
    if (end == std::string::npos) return {};
    s.head_done = true;
    s.head = std::string();
    if (!s.upgraded) {
      s.failure = "the WebSocket upgrade was not completed";
      return failed();
    }
    bytes.remove_prefix(take);
  }

  // Frames. Whole plain text frames (all the server sends but for its rare pings and close) are
  // read here, their events views of the bytes read; anything else goes whole to websocketpp.
  // A frame begun in an earlier read is completed in `pending` from the front of these bytes,
  // and no more of them: its event is handed on without an owner, valid during the call (as
  // the raw wire's), and the frames after it are read in place. (Appending the whole read to
  // `pending` made every event in it a copy: two allocations each.)
  if (!s.pending.empty()) {
    WsFrameHead frame;
    while (!read_ws_frame_head(s.pending, frame) && !bytes.empty()) {  // a header: 14 bytes at most
      s.pending.push_back(bytes.front());
      bytes.remove_prefix(1);
    }
    s.partial = true;
    if (bytes.empty() && !read_ws_frame_head(s.pending, frame)) return {};
    if (frame.length > s.max_frame_size) {
      s.refuse_too_big(frame.length);
      return failed();
    }
    const std::size_t size = frame.header + static_cast<std::size_t>(frame.length);
    const std::size_t needed = size - s.pending.size();
    if (bytes.size() < needed) {
      s.pending.append(bytes);
      return {};
    }
    s.pending.append(bytes.substr(0, needed));
    bytes.remove_prefix(needed);
    static const std::shared_ptr<const void> none;
    s.read_frames(s.pending, none);  // exactly the one frame
    s.pending.clear();
    if (!s.failure.empty()) return failed();
  }
  const std::size_t consumed = s.read_frames(bytes, owner);
  if (!s.failure.empty()) return failed();
  if (consumed < bytes.size()) s.pending.assign(bytes.substr(consumed));
  s.partial = !s.pending.empty();
  return {};
}

void WsWire::send(std::string_view event) {
  State& s = *state_;
  if (!s.connection) return;
  if (s.open && s.connection->get_state() == websocketpp::session::state::open) {
    // Framed here, straight into output(): websocketpp would allocate two messages and copy the
    // event twice per frame. Its own frames (pongs, close) are written synchronously through
    // the write handler too, so the order on the wire is kept.
    append_masked_text_frame(s.output, event, s.mask_key());
    return;
  }
  auto ec = s.connection->send(event.data(), event.size(), websocketpp::frame::opcode::text);
  if (ec && s.failure.empty()) s.failure = "WebSocket send: " + ec.message();
}

bool WsWire::partial_frame() const {
  return state_->partial;
}
std::uint64_t WsWire::frames_completed() const {
  return state_->frames;
}

std::string& WsWire::output() {
  return state_->output;
}
bool WsWire::is_open() const {
  return state_->open;
}

}  // namespace polybus::quickio::detail
