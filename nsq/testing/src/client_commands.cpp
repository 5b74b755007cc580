// SPDX-License-Identifier: Apache-2.0
// The V2 commands as nsqd 1.3 executes them: each command's state rules, argument checks, body
// size checks and error frames (code, text, fatal or not), in the order nsqd makes them.
#include <limits>

#include "client_connection.hpp"
#include "go_text.hpp"
#include "polybus/nsq/codec.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// nsqd's protocol.ByteToBase10: digits only (none at all reads as 0), wrapping on overflow.
bool parse_base10(std::string_view text, std::uint64_t& out) {
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = value;
  return true;
}

std::int64_t as_int64(std::uint64_t value) {
  return value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
             ? -static_cast<std::int64_t>(~value) - 1
             : static_cast<std::int64_t>(value);
}

std::string str(std::string_view text) {
  return std::string(text);
}

std::uint32_t read_be32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace

void ClientConnection::on_line(const std::vector<std::string_view>& params) {
  const std::string_view command = params[0];
  journal_command(params);
  // A command with a body meets its faults with the body (on_body).
  std::optional<polybus::testing::FaultRule> fault;
  if (!(command == "IDENTIFY" || command == "AUTH" || command == "PUB" || command == "MPUB" ||
        command == "DPUB")) {
    bool intercepted = false;
    const std::string_view topic = command == "SUB" && params.size() >= 2 ? params[1]
                                   : topic_ != nullptr ? std::string_view(topic_->name())
                                                       : std::string_view();
    fault = fault_for(command, topic, intercepted);
    if (intercepted) return command_done();
  }
  run_line(params);
  if (fault && fault->action == polybus::testing::FaultRule::Action::duplicate) run_line(params);
}

void ClientConnection::run_line(const std::vector<std::string_view>& params) {
  const std::string_view command = params[0];
  if (command == "IDENTIFY") return identify(params);
  if (server_.tls_required() && !tls_active_) {
    fatal("E_INVALID", "cannot " + str(command) + " in current state (TLS required)");
    return command_done();
  }
  if (command == "FIN") {
    fin(params);
  } else if (command == "RDY") {
    rdy(params);
  } else if (command == "REQ") {
    req(params);
  } else if (command == "PUB") {
    return pub(params);
  } else if (command == "MPUB") {
    return mpub(params);
  } else if (command == "DPUB") {
    return dpub(params);
  } else if (command == "NOP") {
    // nothing to do: it only proves the client is alive
  } else if (command == "TOUCH") {
    touch(params);
  } else if (command == "SUB") {
    sub(params);
  } else if (command == "CLS") {
    cls();
  } else if (command == "AUTH") {
    return auth(params);
  } else {
    fatal("E_INVALID", "invalid command " + str(command));
  }
  command_done();
}

void ClientConnection::on_body_size(std::int32_t size) {
  const NsqdOptions& options = server_.options();
  const std::string text = std::to_string(size);
  switch (body_command_) {
    case BodyCommand::identify:
    case BodyCommand::auth: {
      const char* name = body_command_ == BodyCommand::identify ? "IDENTIFY" : "AUTH";
      if (size > options.max_body_size) {
        return fatal("E_BAD_BODY", str(name) + " body too big " + text + " > " +
                                       std::to_string(options.max_body_size));
      }
      if (size <= 0) return fatal("E_BAD_BODY", str(name) + " invalid body size " + text);
      break;
    }
    case BodyCommand::pub:
    case BodyCommand::dpub: {
      const char* name = body_command_ == BodyCommand::pub ? "PUB" : "DPUB";
      if (size <= 0) {
        return fatal("E_BAD_MESSAGE", str(name) + " invalid message body size " + text);
      }
      if (size > options.max_msg_size) {
        return fatal("E_BAD_MESSAGE", str(name) + " message too big " + text + " > " +
                                          std::to_string(options.max_msg_size));
      }
      break;
    }
    case BodyCommand::mpub:
      if (size <= 0) return fatal("E_BAD_BODY", "MPUB invalid body size " + text);
      if (size > options.max_body_size) {
        return fatal("E_BAD_BODY",
                     "MPUB body too big " + text + " > " + std::to_string(options.max_body_size));
      }
      break;
    case BodyCommand::none:
      return fatal("E_INVALID", "unexpected body");
  }
  parser_.expect_body(static_cast<std::size_t>(size));
}

void ClientConnection::on_body(std::string_view body) {
  const BodyCommand command = body_command_;
  body_command_ = BodyCommand::none;
  static constexpr std::string_view kNames[] = {"", "IDENTIFY", "AUTH", "PUB", "MPUB", "DPUB"};
  const std::string_view name = kNames[static_cast<int>(command)];
  journal_body(name, body);
  bool intercepted = false;
  const bool publishes =
      command == BodyCommand::pub || command == BodyCommand::mpub || command == BodyCommand::dpub;
  std::optional<polybus::testing::FaultRule> fault;
  if (!name.empty())
    fault = fault_for(name, publishes ? std::string_view(body_topic_) : "", intercepted);
  if (intercepted) return command_done();
  run_body(command, body);
  if (fault && fault->action == polybus::testing::FaultRule::Action::duplicate)
    run_body(command, body);
  command_done();
}

void ClientConnection::run_body(BodyCommand command, std::string_view body) {
  switch (command) {
    case BodyCommand::identify:
      identify_body(body);
      break;
    case BodyCommand::auth:
      auth_body(body);
      break;
    case BodyCommand::pub:
      pub_body(body);
      break;
    case BodyCommand::mpub:
      mpub_body(body);
      break;
    case BodyCommand::dpub:
      dpub_body(body);
      break;
    case BodyCommand::none:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// IDENTIFY and AUTH

void ClientConnection::identify(const std::vector<std::string_view>&) {
  if (state_ != State::init) return fatal("E_INVALID", "cannot IDENTIFY in current state");
  body_command_ = BodyCommand::identify;
  parser_.expect_size();
}

void ClientConnection::identify_body(std::string_view body) {
  const NsqdOptions& options = server_.options();
  IdentifyRequest request;
  if (!parse_identify_request(body, request)) {
    return fatal("E_BAD_BODY", "IDENTIFY failed to decode JSON body");
  }
  if (std::string refused = apply_identify(request, options, settings_); !refused.empty()) {
    return fatal("E_BAD_BODY", "IDENTIFY " + refused);
  }
  restart_heartbeats();
  if (!request.feature_negotiation) return send_response(kOkBody);

  // Each layer is switched on once; a second IDENTIFY cannot stack another.
  const bool can_switch = !codec_ && !tls_active_;
  Negotiated negotiated =
      negotiate(request, options, can_switch && server_.tls_context() != nullptr);
  if (codec_) negotiated.snappy = negotiated.deflate = false;
  if (negotiated.deflate && negotiated.snappy) {
    return fatal("E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression");
  }
  send_response(identify_response(options, settings_, negotiated));
  if (negotiated.tls_v1) {
    tls_pending_ = true;  // what follows is held until TLS is up
    layer_switched_ = true;
    send_response(kOkBody);
  }
  if (negotiated.snappy || negotiated.deflate) {
    // Bounds what one read may decompress to; generous for any body nsqd accepts.
    const std::size_t max_decoded = std::max<std::size_t>(
        32 * 1024 * 1024, 2 * static_cast<std::size_t>(options.max_body_size));
    snappy_ = negotiated.snappy;
    deflate_ = !negotiated.snappy;
    codec_ = negotiated.snappy ? make_snappy_codec(max_decoded)
                               : make_deflate_codec(negotiated.deflate_level, max_decoded);
    layer_switched_ = true;
    send_response(kOkBody);
  }
  if (tls_pending_) start_tls_when_flushed();
}

void ClientConnection::auth(const std::vector<std::string_view>& params) {
  if (state_ != State::init) return fatal("E_INVALID", "cannot AUTH in current state");
  if (params.size() != 1) return fatal("E_INVALID", "AUTH invalid number of parameters");
  body_command_ = BodyCommand::auth;
  parser_.expect_size();
}

void ClientConnection::auth_body(std::string_view body) {
  const NsqdOptions& options = server_.options();
  if (authed_) return fatal("E_INVALID", "AUTH already set");
  if (options.auth_secret.empty()) return fatal("E_AUTH_DISABLED", "AUTH disabled");
  if (body != options.auth_secret) return fatal("E_AUTH_FAILED", "AUTH failed");
  authed_ = true;
  send_response("{\"identity\":" + go_json_string(options.auth_identity) +
                ",\"identity_url\":\"\",\"permission_count\":1}");
}

bool ClientConnection::check_auth(std::string_view command) {
  if (server_.options().auth_secret.empty() || authed_) return true;
  fatal("E_AUTH_FIRST", "AUTH required before " + str(command));
  return false;
}

// ---------------------------------------------------------------------------------------------
// Consuming

void ClientConnection::sub(const std::vector<std::string_view>& params) {
  if (state_ != State::init) return fatal("E_INVALID", "cannot SUB in current state");
  if (settings_.heartbeat_interval.count() <= 0) {
    return fatal("E_INVALID", "cannot SUB with heartbeats disabled");
  }
  if (params.size() < 3) return fatal("E_INVALID", "SUB insufficient number of parameters");
  const std::string topic_name(params[1]);
  if (!valid_topic_name(topic_name)) {
    return fatal("E_BAD_TOPIC", "SUB topic name " + go_quote(topic_name) + " is not valid");
  }
  const std::string channel_name(params[2]);
  if (!valid_channel_name(channel_name)) {
    return fatal("E_BAD_CHANNEL", "SUB channel name " + go_quote(channel_name) + " is not valid");
  }
  if (!check_auth("SUB")) return;
  Broker& broker = server_.broker();
  topic_ = &broker.topic(topic_name);
  channel_ = &broker.channel(*topic_, channel_name);
  broker.subscribe(*channel_, *this);
  state_ = State::subscribed;
  send_response(kOkBody);
}

void ClientConnection::rdy(const std::vector<std::string_view>& params) {
  if (state_ == State::closing) return;  // nsqd ignores RDY after CLS
  if (state_ != State::subscribed) return fatal("E_INVALID", "cannot RDY in current state");
  std::int64_t count = 1;
  if (params.size() > 1) {
    std::uint64_t parsed = 0;
    if (!parse_base10(params[1], parsed)) {
      return fatal("E_INVALID", "RDY could not parse count " + str(params[1]));
    }
    count = as_int64(parsed);
  }
  const std::int64_t max = server_.options().max_rdy_count;
  if (count < 0 || count > max) {
    // Fatal in nsqd too: the client's idea of its RDY count would be wrong.
    return fatal("E_INVALID",
                 "RDY count " + std::to_string(count) + " out of range 0-" + std::to_string(max));
  }
  ready_count_ = count;
  channel_->note_ready_count(count);
  server_.broker().changed(*channel_);
}

bool ClientConnection::check_subscribed_or_closing(std::string_view command) {
  if (state_ == State::subscribed || state_ == State::closing) return true;
  fatal("E_INVALID", "cannot " + str(command) + " in current state");
  return false;
}

void ClientConnection::fin(const std::vector<std::string_view>& params) {
  if (!check_subscribed_or_closing("FIN")) return;
  if (params.size() < 2) return fatal("E_INVALID", "FIN insufficient number of params");
  if (params[1].size() != kMessageIdSize) return fatal("E_INVALID", "invalid message ID");
  const std::string failure = channel_->finish(id_, MessageId::from_wire(params[1]));
  if (!failure.empty()) {
    return send_error("E_FIN_FAILED", "FIN " + str(params[1]) + " failed " + failure);
  }
  --in_flight_;
  ++finish_count_;
  server_.broker().changed(*channel_);
}

void ClientConnection::req(const std::vector<std::string_view>& params) {
  if (!check_subscribed_or_closing("REQ")) return;
  if (params.size() < 3) return fatal("E_INVALID", "REQ insufficient number of params");
  if (params[1].size() != kMessageIdSize) return fatal("E_INVALID", "invalid message ID");
  std::uint64_t delay_ms = 0;
  if (!parse_base10(params[2], delay_ms)) {
    return fatal("E_INVALID", "REQ could not parse timeout " + str(params[2]));
  }
  // nsqd clamps the delay into 0..--max-req-timeout rather than refusing it.
  const std::uint64_t max_ms =
      static_cast<std::uint64_t>(server_.options().max_req_timeout.count());
  const std::chrono::milliseconds delay(static_cast<std::int64_t>(std::min(delay_ms, max_ms)));
  const std::string failure =
      channel_->requeue(id_, MessageId::from_wire(params[1]), delay, server_.broker().now());
  if (!failure.empty()) {
    return send_error("E_REQ_FAILED", "REQ " + str(params[1]) + " failed " + failure);
  }
  --in_flight_;
  ++requeue_count_;
  server_.broker().changed(*channel_);
}

void ClientConnection::touch(const std::vector<std::string_view>& params) {
  if (!check_subscribed_or_closing("TOUCH")) return;
  if (params.size() < 2) return fatal("E_INVALID", "TOUCH insufficient number of params");
  if (params[1].size() != kMessageIdSize) return fatal("E_INVALID", "invalid message ID");
  const std::string failure =
      channel_->touch(id_, MessageId::from_wire(params[1]), settings_.msg_timeout,
                      server_.options().max_msg_timeout, server_.broker().now());
  if (!failure.empty()) {
    return send_error("E_TOUCH_FAILED", "TOUCH " + str(params[1]) + " failed " + failure);
  }
  server_.broker().changed(*channel_);
}

void ClientConnection::cls() {
  if (state_ != State::subscribed) return fatal("E_INVALID", "cannot CLS in current state");
  ready_count_ = 0;
  state_ = State::closing;
  send_response(kCloseWaitBody);
}

// ---------------------------------------------------------------------------------------------
// Publishing

void ClientConnection::pub(const std::vector<std::string_view>& params) {
  if (params.size() < 2) return fatal("E_INVALID", "PUB insufficient number of parameters");
  if (!valid_topic_name(params[1])) {
    return fatal("E_BAD_TOPIC", "PUB topic name " + go_quote(params[1]) + " is not valid");
  }
  body_topic_ = str(params[1]);
  body_command_ = BodyCommand::pub;
  parser_.expect_size();
}

void ClientConnection::pub_body(std::string_view body) {
  if (!check_auth("PUB")) return;
  if (!server_.broker().publish(body_topic_, {str(body)}, std::chrono::milliseconds(0))) {
    return fatal("E_PUB_FAILED", "PUB failed memory and disk queue limits reached");
  }
  count_published(1);
  send_response(kOkBody);
}

void ClientConnection::mpub(const std::vector<std::string_view>& params) {
  if (params.size() < 2) return fatal("E_INVALID", "MPUB insufficient number of parameters");
  if (!valid_topic_name(params[1])) {
    // nsqd repeats the code in this one description.
    return fatal("E_BAD_TOPIC",
                 "E_BAD_TOPIC MPUB topic name " + go_quote(params[1]) + " is not valid");
  }
  if (!check_auth("MPUB")) return;
  body_topic_ = str(params[1]);
  server_.broker().topic(body_topic_);  // nsqd creates the topic before reading the body
  body_command_ = BodyCommand::mpub;
  parser_.expect_size();
}

void ClientConnection::mpub_body(std::string_view body) {
  const NsqdOptions& options = server_.options();
  if (body.size() < 4) return fatal("E_BAD_BODY", "MPUB failed to read message count");
  const std::int32_t count = static_cast<std::int32_t>(read_be32(body));
  body.remove_prefix(4);
  const std::int64_t max_messages = (options.max_body_size - 4) / 5;  // 4-byte size + 1 byte each
  if (count <= 0 || count > max_messages) {
    return fatal("E_BAD_BODY", "MPUB invalid message count " + std::to_string(count));
  }
  std::vector<std::string> messages;
  messages.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, 1024)));
  for (std::int32_t i = 0; i < count; ++i) {
    const std::string index = std::to_string(i);
    if (body.size() < 4) {
      return fatal("E_BAD_MESSAGE", "MPUB failed to read message(" + index + ") body size");
    }
    const std::int32_t size = static_cast<std::int32_t>(read_be32(body));
    body.remove_prefix(4);
    if (size <= 0) {
      return fatal("E_BAD_MESSAGE",
                   "MPUB invalid message(" + index + ") body size " + std::to_string(size));
    }
    if (size > options.max_msg_size) {
      return fatal("E_BAD_MESSAGE", "MPUB message too big " + std::to_string(size) + " > " +
                                        std::to_string(options.max_msg_size));
    }
    if (body.size() < static_cast<std::size_t>(size)) {
      return fatal("E_BAD_MESSAGE", "MPUB failed to read message body");
    }
    messages.emplace_back(body.substr(0, static_cast<std::size_t>(size)));
    body.remove_prefix(static_cast<std::size_t>(size));
  }
  if (!body.empty()) {
    // nsqd would read these bytes as the next command; a consistent client never sends them.
    return fatal("E_BAD_BODY", "MPUB body size does not match its messages");
  }
  const std::size_t published = messages.size();
  if (!server_.broker().publish(body_topic_, std::move(messages), std::chrono::milliseconds(0))) {
    return fatal("E_MPUB_FAILED", "MPUB failed memory and disk queue limits reached");
  }
  count_published(published);
  send_response(kOkBody);
}

void ClientConnection::dpub(const std::vector<std::string_view>& params) {
  if (params.size() < 3) return fatal("E_INVALID", "DPUB insufficient number of parameters");
  if (!valid_topic_name(params[1])) {
    return fatal("E_BAD_TOPIC", "DPUB topic name " + go_quote(params[1]) + " is not valid");
  }
  std::uint64_t defer_ms = 0;
  if (!parse_base10(params[2], defer_ms)) {
    return fatal("E_INVALID", "DPUB could not parse timeout " + str(params[2]));
  }
  const std::int64_t max_ms = server_.options().max_req_timeout.count();
  if (defer_ms > static_cast<std::uint64_t>(max_ms)) {
    return fatal("E_INVALID", "DPUB timeout " + std::to_string(defer_ms) + " out of range 0-" +
                                  std::to_string(max_ms));
  }
  body_topic_ = str(params[1]);
  body_defer_ = std::chrono::milliseconds(static_cast<std::int64_t>(defer_ms));
  body_command_ = BodyCommand::dpub;
  parser_.expect_size();
}

void ClientConnection::dpub_body(std::string_view body) {
  if (!check_auth("DPUB")) return;
  if (!server_.broker().publish(body_topic_, {str(body)}, body_defer_)) {
    return fatal("E_DPUB_FAILED", "DPUB failed memory and disk queue limits reached");
  }
  count_published(1);
  send_response(kOkBody);
}

}  // namespace polybus::nsq::testing::detail
